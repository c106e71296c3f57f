// Counters: what a PassManager reports after several passes. Most counters
// add up over passes; an assigned one (Inductor assigns a few, such as
// scmerge_split_sections_removed) keeps the last value set.
#include <doctest/doctest.h>

#include "kiln/passes/counters.hpp"

using kiln::Counters;

TEST_CASE("Counters: increments add up, within one Counters and across a merge") {
  Counters a;
  a.increment("pattern_matcher_count");
  a.increment("pattern_matcher_count", 2);
  Counters b;
  b.increment("pattern_matcher_count", 4);
  b.increment("batch_linear");
  a.merge(b);
  CHECK(a.get("pattern_matcher_count") == 7);
  CHECK(a.get("batch_linear") == 1);
  CHECK(a.get("absent") == 0);
  CHECK_FALSE(a.is_assigned("pattern_matcher_count"));
  CHECK(a.to_json() == nlohmann::json{{"batch_linear", 1}, {"pattern_matcher_count", 7}});
}

TEST_CASE("Counters: an assigned counter keeps the last value, within one Counters and across merges") {
  Counters pass1;
  pass1.assign("scmerge_split_sections_removed", 3);
  pass1.assign("scmerge_split_sections_removed", 1);  // a later rewrite of the same pass
  CHECK(pass1.get("scmerge_split_sections_removed") == 1);
  CHECK(pass1.is_assigned("scmerge_split_sections_removed"));

  Counters pass2;
  pass2.assign("scmerge_split_sections_removed", 2);
  pass2.increment("unbind_stack_pass");

  Counters total;
  total.merge(pass1);
  CHECK(total.get("scmerge_split_sections_removed") == 1);
  total.merge(pass2);
  CHECK(total.get("scmerge_split_sections_removed") == 2);  // replaced, not 1 + 2
  CHECK(total.is_assigned("scmerge_split_sections_removed"));
  CHECK(total.get("unbind_stack_pass") == 1);

  Counters none;  // a pass that assigns nothing leaves the value as it is
  none.increment("other");
  total.merge(none);
  CHECK(total.get("scmerge_split_sections_removed") == 2);

  total.clear();
  CHECK(total.empty());
  CHECK_FALSE(total.is_assigned("scmerge_split_sections_removed"));
}
