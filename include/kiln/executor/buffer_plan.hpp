#pragma once
// The buffer planner (after TensorFlow Lite's arena planner): each arena
// buffer lives from the first step that touches it to the last step that
// reads it (through any view of it; graph outputs live to the end), and
// buffers are placed greedily, largest first, at the lowest offset where no
// buffer alive at the same time sits. A step's scratch lives for that step only.
// A collective (kernels/collectives.hpp) runs from its step to its wait's: the
// wait step lists the collective's input, output and request among its reads,
// so those buffers live, unmoved, until MPI has finished with them.
#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <vector>

#include "kiln/runtime/program.hpp"

namespace kiln::runtime {

namespace detail {
inline std::size_t align_up(std::size_t n, std::size_t a = kTensorAlignment) { return (n + a - 1) / a * a; }

struct Lifetime {
  std::size_t size = 0;
  std::size_t first = std::numeric_limits<std::size_t>::max();
  std::size_t last = 0;
  std::size_t offset = 0;
  ValueId value = 0;
  std::size_t step = 0;  // for a scratch buffer
  bool scratch = false;
};
}  // namespace detail

// Sets every arena value's and every step's scratch offset and the program's
// arena_bytes and peak_live_bytes.
inline void plan_buffers(Program& p) {
  using detail::Lifetime;
  const std::size_t end = p.steps.size();
  std::vector<Lifetime> buf(p.values.size());
  auto root = [&](ValueId v) { return p.values[v].storage == Storage::view ? p.values[v].base : v; };
  auto touch = [&](ValueId v, std::size_t t) {
    const ValueId r = root(v);
    if (p.values[r].storage != Storage::arena) return;
    buf[r].first = std::min(buf[r].first, t);
    buf[r].last = std::max(buf[r].last, t);
  };
  for (std::size_t t = 0; t < end; ++t) {
    for (ValueId v : p.steps[t]->writes) touch(v, t);
    for (ValueId v : p.steps[t]->reads) touch(v, t);
  }
  for (ValueId v : p.outputs) touch(v, end);

  std::vector<Lifetime> items;
  for (ValueId v = 0; v < p.values.size(); ++v) {
    if (p.values[v].storage != Storage::arena || buf[v].first > buf[v].last) continue;
    Lifetime l = buf[v];
    l.size = detail::align_up(std::max<std::size_t>(p.values[v].layout.nbytes(), 1));
    l.value = v;
    items.push_back(l);
  }
  for (std::size_t t = 0; t < end; ++t) {
    if (!p.steps[t]->scratch_bytes) continue;
    Lifetime l;
    l.size = detail::align_up(p.steps[t]->scratch_bytes);
    l.first = l.last = t;
    l.step = t;
    l.scratch = true;
    items.push_back(l);
  }

  std::vector<std::size_t> order(items.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return items[a].size != items[b].size ? items[a].size > items[b].size : items[a].first < items[b].first;
  });
  std::vector<std::size_t> placed;
  std::size_t arena = 0;
  std::vector<const Lifetime*> overlapping;
  for (std::size_t i : order) {
    Lifetime& it = items[i];
    overlapping.clear();
    for (std::size_t j : placed)
      if (items[j].first <= it.last && it.first <= items[j].last) overlapping.push_back(&items[j]);
    std::sort(overlapping.begin(), overlapping.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    std::size_t offset = 0;
    for (const Lifetime* o : overlapping) {
      if (o->offset >= offset + it.size) break;
      offset = std::max(offset, o->offset + o->size);
    }
    it.offset = offset;
    arena = std::max(arena, offset + it.size);
    placed.push_back(i);
  }
  for (const Lifetime& it : items) {
    if (it.scratch) p.steps[it.step]->scratch_offset = it.offset;
    else p.values[it.value].arena_offset = it.offset;
  }
  p.arena_bytes = arena;

  // The most bytes alive at once: what any placement needs at least.
  std::map<std::size_t, long long> delta;
  for (const Lifetime& it : items) {
    delta[it.first] += static_cast<long long>(it.size);
    delta[it.last + 1] -= static_cast<long long>(it.size);
  }
  long long live = 0, peak = 0;
  for (const auto& [t, d] : delta) peak = std::max(peak, live += d);
  p.peak_live_bytes = static_cast<std::size_t>(peak);
}

}  // namespace kiln::runtime
