#pragma once
// One rank's shard of a weight: the weight flattened in C order, padded with
// zeros to a multiple of the number of ranks, and rank r's contiguous 1/N of
// that. Gathered in rank order, the shards are the padded flat weight again,
// which is what an all_gather_into_tensor of them gives every rank.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kiln/io/npy_weights.hpp"

namespace kiln::sharding {

// Elements per shard of a weight of `numel` elements over `ranks` ranks.
inline std::int64_t shard_numel(std::int64_t numel, std::int64_t ranks) { return (numel + ranks - 1) / ranks; }

// Rank `rank`'s shard of a weight of `numel` elements of `dtype`; `read(from,
// count)` gives that run of the flat weight's bytes (only the shard's are asked for).
template <class Read>
io::WeightTensor weight_shard(DType dtype, std::int64_t numel, std::int64_t ranks, std::int64_t rank, Read read) {
  const std::int64_t per = shard_numel(numel, ranks);
  const std::size_t item = dtype_itemsize(dtype);
  io::WeightTensor s;
  s.dtype = dtype;
  s.shape = {per};
  s.bytes.assign(static_cast<std::size_t>(per) * item, std::byte{0});  // the padding stays zero
  const std::int64_t from = std::min(rank * per, numel);
  const std::int64_t to = std::min(from + per, numel);
  if (to > from) {
    const std::vector<std::byte> run = read(from, to - from);
    std::memcpy(s.bytes.data(), run.data(), run.size());
  }
  return s;
}

inline io::WeightTensor weight_shard(const io::WeightTensor& w, std::int64_t ranks, std::int64_t rank) {
  const std::size_t item = w.itemsize();
  return weight_shard(w.dtype, w.numel(), ranks, rank, [&](std::int64_t from, std::int64_t count) {
    const auto* p = w.bytes.data() + static_cast<std::size_t>(from) * item;
    return std::vector<std::byte>(p, p + static_cast<std::size_t>(count) * item);
  });
}

}  // namespace kiln::sharding
