#pragma once
// One rank's shard of a weight: the weight flattened in C order, padded with
// zeros to a multiple of the number of ranks, and rank r's contiguous 1/N of
// that. Gathered in rank order, the shards are the padded flat weight again,
// which is what an all_gather_into_tensor of them gives every rank.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kiln/io/npy_weights.hpp"

namespace kiln::sharding {

// Elements per shard of a weight of `numel` elements over `ranks` ranks.
inline std::int64_t shard_numel(std::int64_t numel, std::int64_t ranks) { return (numel + ranks - 1) / ranks; }

inline io::WeightTensor weight_shard(const io::WeightTensor& w, std::int64_t ranks, std::int64_t rank) {
  const std::int64_t per = shard_numel(w.numel(), ranks);
  const std::size_t item = w.itemsize();
  io::WeightTensor s;
  s.dtype = w.dtype;
  s.shape = {per};
  s.bytes.assign(static_cast<std::size_t>(per) * item, std::byte{0});  // the padding stays zero
  const std::int64_t from = std::min(rank * per, w.numel());
  const std::int64_t to = std::min(from + per, w.numel());
  if (to > from)
    std::memcpy(s.bytes.data(), w.bytes.data() + static_cast<std::size_t>(from) * item,
                static_cast<std::size_t>(to - from) * item);
  return s;
}

}  // namespace kiln::sharding
