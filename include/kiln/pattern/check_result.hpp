#pragma once
// What an extra_check returns: accept, or reject with the reason that
// KILN_PATTERN_DEBUG prints. A check that returns bool keeps working; one that
// wants to say why returns a CheckResult:
//
//   [](const auto& m) -> kiln::CheckResult {
//     if (!python_equal(get<"alpha">(m), kiln::Arg(1))) return kiln::reject("alpha is not 1");
//     return true;
//   }
#include <string>
#include <string_view>
#include <utility>

namespace kiln {

class CheckResult {
 public:
  CheckResult(bool accepted) : accepted_(accepted) {}  // NOLINT: a bool is a verdict without a reason

  // A rejection with a reason: a literal is kept by pointer (nothing is
  // allocated on a path that rejects often), a built string is moved in.
  static CheckResult reject(const char* reason) {
    CheckResult r(false);
    r.literal_ = reason;
    return r;
  }
  static CheckResult reject(std::string reason) {
    CheckResult r(false);
    r.owned_ = std::move(reason);
    return r;
  }

  bool accepted() const { return accepted_; }
  explicit operator bool() const { return accepted_; }
  // Why the match was rejected; empty if accepted or no reason was given.
  std::string_view reason() const { return literal_ ? std::string_view(literal_) : std::string_view(owned_); }

 private:
  bool accepted_;
  const char* literal_ = nullptr;
  std::string owned_;
};

inline CheckResult reject(const char* reason) { return CheckResult::reject(reason); }
inline CheckResult reject(std::string reason) { return CheckResult::reject(std::move(reason)); }

}  // namespace kiln
