#pragma once
// shard_parameters' options: the ranks the weights are sharded over
// (world_size, required), this process's rank (required when world_size > 1),
// the group the all-gathers run in (group_name, default "0", PyTorch's default
// process group) and min_numel (default 0: every weight is sharded; a weight of
// fewer elements stays whole on every rank, where a collective would cost more
// than the memory it saves). kiln-run fills world_size and rank from the MPI
// launcher, and with 1 and 0 when it runs alone.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "kiln/core/error.hpp"

namespace kiln::sharding {

struct ShardOptions {
  std::int64_t world_size = 1;
  std::int64_t rank = 0;
  std::string group_name = "0";
  std::int64_t min_numel = 0;

  static ShardOptions from_json(const nlohmann::json& options, const std::string& pass = "shard_parameters") {
    auto bad = [&](const std::string& key, const std::string& want) {
      return Error("pass " + pass + ": option " + key + " must be " + want + ", got " + options.at(key).dump());
    };
    auto integer = [&](const std::string& key, std::int64_t lo, const std::string& want) {
      const auto& v = options.at(key);
      if (!v.is_number_integer() || v.get<std::int64_t>() < lo) throw bad(key, want);
      return v.get<std::int64_t>();
    };
    ShardOptions o;
    if (!options.contains("world_size"))
      throw Error("pass " + pass + ": option world_size is missing (the number of ranks the weights are sharded over; "
                  "kiln-run fills it, and rank, from mpirun)");
    o.world_size = integer("world_size", 1, "an integer >= 1");
    if (options.contains("rank")) {
      o.rank = integer("rank", 0, "an integer in [0, world_size)");
      if (o.rank >= o.world_size) throw bad("rank", "an integer in [0, world_size " + std::to_string(o.world_size) + ")");
    } else if (o.world_size > 1) {
      throw Error("pass " + pass + ": option rank is missing (this process's rank among world_size " +
                  std::to_string(o.world_size) + ")");
    }
    if (options.contains("group_name")) {
      if (!options.at("group_name").is_string() || options.at("group_name").get<std::string>().empty())
        throw bad("group_name", "a non-empty string");
      o.group_name = options.at("group_name").get<std::string>();
    }
    if (options.contains("min_numel")) o.min_numel = integer("min_numel", 0, "an integer >= 0");
    return o;
  }
};

}  // namespace kiln::sharding
