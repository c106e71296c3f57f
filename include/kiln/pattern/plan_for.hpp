#pragma once
// PlanFor<P>: what prepares a registered pattern of type P for matching and what
// its handler gets. A compiled pattern: PatternPlan<P> and Match<P>. A
// RuntimePattern: RuntimeMatcher and RuntimeMatch, declared by
// runtime_matcher.hpp, so that a translation unit of compiled patterns alone
// does not parse the runtime matcher. PatternMatcherPass's one Entry template
// serves both kinds through it.
#include <type_traits>

#include "kiln/pattern/match.hpp"

namespace kiln::pattern {

class RuntimePattern;

template <class P>
struct PlanFor {
  static_assert(!std::is_same_v<P, RuntimePattern>,
                "registering a RuntimePattern needs kiln/pattern/runtime_matcher.hpp (its PlanFor)");
  using Plan = PatternPlan<P>;
  using Match = pattern::Match<P>;
};

}  // namespace kiln::pattern
