#pragma once
// The bucket cap in megabytes by bucket index: the pass option `bucket_cap_mb`,
// a number or a list read by index (the last entry repeating); 2000 by default,
// Inductor's bucket_cap_mb_by_bucket_idx_default.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core/error.hpp"

namespace kiln::bucketing {

class BucketCap {
 public:
  BucketCap() = default;
  explicit BucketCap(std::vector<double> mb) : mb_(std::move(mb)) {
    if (mb_.empty()) throw Error("bucket_cap_mb: needs at least one entry");
  }
  double mb(std::size_t bucket_index) const { return mb_[std::min(bucket_index, mb_.size() - 1)]; }
  // As Inductor: int(cap_mb * 1024 * 1024).
  std::int64_t bytes(std::size_t bucket_index) const { return static_cast<std::int64_t>(mb(bucket_index) * 1024 * 1024); }

  // From a pass's options object; errors name the pass and the value.
  static BucketCap from_options(const nlohmann::json& options, const std::string& pass) {
    const auto it = options.find("bucket_cap_mb");
    if (it == options.end()) return {};
    auto bad = [&] {
      return Error("pass " + pass + ": option bucket_cap_mb must be a number > 0 or a non-empty list of them, got " +
                   it->dump());
    };
    std::vector<double> mb;
    auto take = [&](const nlohmann::json& v) {
      if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>())) throw bad();
      mb.push_back(v.get<double>());
    };
    if (it->is_array()) {
      if (it->empty()) throw bad();
      for (const auto& v : *it) take(v);
    } else {
      take(*it);
    }
    return BucketCap(std::move(mb));
  }

 private:
  std::vector<double> mb_{2000.0};
};

}  // namespace kiln::bucketing
