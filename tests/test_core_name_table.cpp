// NameTable: torch.fx's _Namespace.create_name rules one by one, the table's
// bookkeeping (bind, release, find, used, size), copy and move, and a randomized
// comparison against the straightforward implementation (a hash map of every name
// plus a hash map of base counts, as Graph had it).
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/core/name_table.hpp"

using namespace kiln;

namespace {

// Distinct Node* values; the table never dereferences them.
struct FakeNodes {
  explicit FakeNodes(std::size_t n) : pool(n) {}
  Node* operator[](std::size_t i) { return reinterpret_cast<Node*>(&pool[i]); }
  std::vector<std::max_align_t> pool;
};

// The straightforward implementation: every used name in one hash map (erased ones
// map to nullptr), base counts in another; make_unique is Graph's make_unique_name.
struct RefTable {
  std::unordered_map<std::string, Node*> names;
  std::unordered_map<std::string, std::int64_t> base_count;

  std::string make_unique(std::string_view candidate, bool avoid_reserved) {
    std::string name = NameTable::sanitize(candidate);
    std::string base = name;
    std::optional<std::int64_t> suffix;
    if (auto us = name.rfind('_'); us != std::string::npos && us > 0 && us + 1 < name.size() &&
                                   std::all_of(name.begin() + static_cast<std::ptrdiff_t>(us) + 1, name.end(),
                                               [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
                                   name.size() - us - 1 < 18) {
      base = name.substr(0, us);
      suffix = std::stoll(name.substr(us + 1));
    }
    std::int64_t num;
    if (!suffix || names.count(name)) {
      auto it = base_count.find(name);
      num = it == base_count.end() ? 0 : it->second;
      if (avoid_reserved && NameTable::is_python_reserved(name)) name = base + "_" + std::to_string(++num);
    } else {
      num = *suffix;
    }
    while (names.count(name)) name = base + "_" + std::to_string(++num);
    base_count[base] = num;
    return name;
  }
  void bind(const std::string& name, Node* node) { names[name] = node; }
  void release(const std::string& name, const Node* node) {
    if (auto it = names.find(name); it != names.end() && it->second == node) it->second = nullptr;
  }
  Node* find(const std::string& name) const {
    auto it = names.find(name);
    return it == names.end() ? nullptr : it->second;
  }
  bool used(const std::string& name) const { return names.count(name) != 0; }
  std::size_t size() const { return names.size(); }
};

// make_unique then bind, as Graph::create_node does.
std::string add(NameTable& t, Node* n, std::string_view candidate, bool derived = false) {
  std::string name = t.make_unique(candidate, derived);
  t.bind(name, n);
  return name;
}

}  // namespace

// ---------------------------------------------------------------- create_name rules

TEST_CASE("derived names count up per base: add, add_1, add_2") {
  NameTable t;
  FakeNodes nodes(8);
  CHECK(add(t, nodes[0], "add", true) == "add");
  CHECK(add(t, nodes[1], "add", true) == "add_1");
  CHECK(add(t, nodes[2], "add", true) == "add_2");
  CHECK(add(t, nodes[3], "mul", true) == "mul");
  CHECK(add(t, nodes[4], "add", true) == "add_3");
  CHECK(t.size() == 5);
  CHECK(t.find("add_1") == nodes[1]);
  CHECK(t.find("mul") == nodes[3]);
  CHECK(t.find("mul_1") == nullptr);
}

TEST_CASE("an explicit add_5 leaves add free, then counting goes on from 5") {
  NameTable t;
  FakeNodes nodes(8);
  CHECK(add(t, nodes[0], "add_5") == "add_5");
  CHECK(add(t, nodes[1], "add", true) == "add");
  CHECK(add(t, nodes[2], "add", true) == "add_6");
  CHECK(add(t, nodes[3], "add", true) == "add_7");
  CHECK(add(t, nodes[4], "add_5") == "add_1");  // taken: counts on from base "add_5"'s count (0), not add's
}

TEST_CASE("a taken suffixed name counts on from the whole name's count, as torch.fx does") {
  NameTable t;
  FakeNodes nodes(8);
  CHECK(add(t, nodes[0], "add_3") == "add_3");
  CHECK(add(t, nodes[1], "add_3") == "add_1");  // base_count["add_3"] is 0: add_1 is the first free
  CHECK(add(t, nodes[2], "add_3") == "add_2");
  CHECK(add(t, nodes[3], "add_3") == "add_4");
  CHECK(add(t, nodes[4], "add_3_1") == "add_3_1");  // base "add_3", count 1
  CHECK(add(t, nodes[5], "add_3") == "add_5");      // count of "add_3" is 1: add_2, add_3, add_4 taken
}

TEST_CASE("free legal names are kept verbatim, leading zeros included") {
  NameTable t;
  FakeNodes nodes(8);
  CHECK(add(t, nodes[0], "add_01") == "add_01");
  CHECK(add(t, nodes[1], "add_01") == "add_1");  // taken: suffix counted from 0
  CHECK(add(t, nodes[2], "add_0") == "add_0");
  CHECK(add(t, nodes[3], "add_00") == "add_00");
  CHECK(t.find("add_01") == nodes[0]);
  CHECK(t.find("add_1") == nodes[1]);
  CHECK(t.find("add_0") == nodes[2]);
  CHECK(t.find("add_00") == nodes[3]);
  CHECK(t.size() == 4);
}

TEST_CASE("derived Python builtins and keywords get a suffix, explicit ones are kept") {
  NameTable t;
  FakeNodes nodes(8);
  CHECK(add(t, nodes[0], "abs", true) == "abs_1");
  CHECK(add(t, nodes[1], "abs", true) == "abs_2");
  CHECK(add(t, nodes[2], "abs", false) == "abs");
  CHECK(add(t, nodes[3], "abs", false) == "abs_3");
  CHECK(add(t, nodes[4], "sum", true) == "sum_1");
  CHECK(add(t, nodes[5], "relu", true) == "relu");
  CHECK(add(t, nodes[6], "input", false) == "input");
  CHECK(NameTable::is_python_reserved("torch"));
  CHECK(NameTable::is_python_reserved("None"));
  CHECK_FALSE(NameTable::is_python_reserved("relu"));
  CHECK_FALSE(NameTable::is_python_reserved("abs_1"));
}

TEST_CASE("sanitize: one underscore per run of illegal characters, _unnamed, leading digit") {
  CHECK(NameTable::sanitize("conv.weight") == "conv_weight");
  CHECK(NameTable::sanitize("a..b") == "a_b");
  CHECK(NameTable::sanitize("weird name!") == "weird_name_");
  CHECK(NameTable::sanitize("") == "_unnamed");
  CHECK(NameTable::sanitize("0.weight") == "_0_weight");
  CHECK(NameTable::sanitize("9") == "_9");
  CHECK(NameTable::sanitize("...") == "_");
  CHECK(NameTable::sanitize("a__b") == "a__b");  // legal underscores are kept as they are
  NameTable t;
  CHECK(t.make_unique("", false) == "_unnamed");
  CHECK(t.make_unique("", false) == "_unnamed");  // make_unique does not mark the name used
  CHECK(t.make_unique("layers.0.bias", false) == "layers_0_bias");
  CHECK(t.make_unique("1", false) == "_1");
  CHECK(t.size() == 0);
}

TEST_CASE("suffixes are parsed only below 18 digits") {
  NameTable t;
  FakeNodes nodes(8);
  const std::string d17 = "add_99999999999999999";   // 17 digits: a suffix
  const std::string d18 = "add_123456789012345678";  // 18 digits: part of the base
  CHECK(add(t, nodes[0], d17) == d17);
  CHECK(add(t, nodes[1], "add", true) == "add");
  CHECK(add(t, nodes[2], "add", true) == "add_100000000000000000");  // counted on past 2^31 and 17 digits
  CHECK(add(t, nodes[3], "add", true) == "add_100000000000000001");
  CHECK(add(t, nodes[4], d18) == d18);
  CHECK(add(t, nodes[5], d18) == d18 + "_1");
  CHECK(t.find("add_100000000000000000") == nodes[2]);
  CHECK(t.find(d17) == nodes[0]);
  CHECK(t.find(d18 + "_1") == nodes[5]);
  CHECK(t.size() == 6);
}

TEST_CASE("suffixes around 2^31 and beyond") {
  NameTable t;
  FakeNodes nodes(8);
  CHECK(add(t, nodes[0], "x_2147483647") == "x_2147483647");
  CHECK(add(t, nodes[1], "x", true) == "x");
  CHECK(add(t, nodes[2], "x", true) == "x_2147483648");
  CHECK(add(t, nodes[3], "x_2147483647") == "x_1");
  CHECK(t.find("x_2147483647") == nodes[0]);
  CHECK(t.find("x_2147483648") == nodes[2]);
  CHECK(t.used("x_1"));
  CHECK_FALSE(t.used("x_2"));
  CHECK_FALSE(t.used("x_2147483649"));
}

TEST_CASE("names that are not base_n: bare, trailing or doubled underscores, nested suffixes") {
  NameTable t;
  FakeNodes nodes(16);
  const std::vector<std::string> odd = {"_1", "__1", "add_", "add__", "a_1_2", "_", "__", "a_b_c", "x1", "add__01"};
  for (std::size_t i = 0; i < odd.size(); ++i) CHECK(add(t, nodes[i], odd[i]) == odd[i]);
  for (std::size_t i = 0; i < odd.size(); ++i) CHECK(t.find(odd[i]) == nodes[i]);
  CHECK(t.size() == odd.size());
  CHECK_FALSE(t.used("_2"));
  CHECK_FALSE(t.used("__2"));
  CHECK_FALSE(t.used("a_1"));
  CHECK(t.make_unique("__1", false) == "__2");  // base "_", suffix 1: taken, count of "__1" is 0
  CHECK(t.make_unique("_1", false) == "_1_1");  // no suffix (the base would be empty)
}

// ---------------------------------------------------------------- bookkeeping

TEST_CASE("released names stay used and are not reused") {
  NameTable t;
  FakeNodes nodes(8);
  CHECK(add(t, nodes[0], "relu", true) == "relu");
  CHECK(add(t, nodes[1], "relu", true) == "relu_1");
  t.release("relu", nodes[0]);
  t.release("relu_1", nodes[1]);
  CHECK(t.find("relu") == nullptr);
  CHECK(t.find("relu_1") == nullptr);
  CHECK(t.used("relu"));
  CHECK(t.used("relu_1"));
  CHECK(t.size() == 2);
  CHECK(add(t, nodes[2], "relu", true) == "relu_2");
  CHECK(add(t, nodes[3], "relu", false) == "relu_3");
  CHECK(add(t, nodes[4], "relu_1", false) == "relu_4");
}

TEST_CASE("release only erases the node the name maps to") {
  NameTable t;
  FakeNodes nodes(8);
  t.bind("a", nodes[0]);
  t.bind("a_7", nodes[1]);
  t.bind("a_07", nodes[2]);
  t.release("a", nodes[1]);
  t.release("a_7", nodes[0]);
  t.release("a_07", nullptr);
  t.release("b", nodes[0]);  // unused: stays unused
  t.release("b_3", nullptr);
  CHECK(t.find("a") == nodes[0]);
  CHECK(t.find("a_7") == nodes[1]);
  CHECK(t.find("a_07") == nodes[2]);
  CHECK_FALSE(t.used("b"));
  CHECK_FALSE(t.used("b_3"));
  CHECK(t.size() == 3);
  t.release("a_07", nodes[2]);
  CHECK(t.find("a_07") == nullptr);
  CHECK(t.used("a_07"));
}

TEST_CASE("bind overwrites, and bind of nullptr marks a name used with no node") {
  NameTable t;
  FakeNodes nodes(8);
  t.bind("add_3", nodes[0]);
  t.bind("add_3", nodes[1]);
  CHECK(t.find("add_3") == nodes[1]);
  t.release("add_3", nodes[0]);  // no longer that name's node
  CHECK(t.find("add_3") == nodes[1]);
  t.bind("mul", nullptr);
  CHECK(t.used("mul"));
  CHECK(t.find("mul") == nullptr);
  t.bind("mul", nodes[2]);  // re-binding a released name makes it live again
  CHECK(t.find("mul") == nodes[2]);
  CHECK(t.size() == 2);
  CHECK(t.make_unique("mul", true) == "mul_1");
}

TEST_CASE("a suffix far past the used ones is kept aside, then moved into the vector") {
  NameTable t;
  FakeNodes nodes(6000);
  t.bind("add_5000", nodes[5000]);
  t.bind("add_4000", nodes[4000]);
  t.release("add_4000", nodes[4000]);
  t.bind("add_01", nodes[1]);
  CHECK(t.find("add_5000") == nodes[5000]);
  CHECK(t.used("add_4000"));
  for (std::size_t i = 0; i < 3000; ++i) CHECK(add(t, nodes[i], "add", true) == (i ? "add_" + std::to_string(i) : "add"));
  // The numbers past 3000 skip the used names 4000 and 5000.
  std::size_t next = 3000;
  for (int k = 0; k < 2100; ++k) {
    if (next == 4000 || next == 5000) ++next;
    REQUIRE(add(t, nodes[next % 6000], "add", true) == "add_" + std::to_string(next));
    ++next;
  }
  CHECK(t.find("add_5000") == nodes[5000]);
  CHECK(t.find("add_4000") == nullptr);
  CHECK(t.used("add_4000"));
  CHECK(t.find("add_01") == nodes[1]);
  CHECK(t.size() == 3 + 3000 + 2100);
}

TEST_CASE("clear empties the table and the counts") {
  NameTable t;
  FakeNodes nodes(4);
  add(t, nodes[0], "add", true);
  add(t, nodes[1], "add", true);
  add(t, nodes[2], "add_01");
  t.clear();
  CHECK(t.size() == 0);
  CHECK_FALSE(t.used("add"));
  CHECK_FALSE(t.used("add_01"));
  CHECK(add(t, nodes[0], "add", true) == "add");
  CHECK(add(t, nodes[1], "add", true) == "add_1");
}

TEST_CASE("reserve keeps the contents") {
  NameTable t;
  FakeNodes nodes(4);
  add(t, nodes[0], "add", true);
  t.reserve(180000);
  CHECK(t.find("add") == nodes[0]);
  CHECK(add(t, nodes[1], "add", true) == "add_1");
}

TEST_CASE("a copy is independent of its original") {
  NameTable t;
  FakeNodes nodes(8);
  add(t, nodes[0], "add", true);
  add(t, nodes[1], "add", true);
  add(t, nodes[2], "add_01");
  add(t, nodes[3], "x_99999", false);  // far: kept aside
  NameTable c = t;
  CHECK(c.size() == 4);
  CHECK(c.find("add_1") == nodes[1]);
  CHECK(c.find("x_99999") == nodes[3]);
  c.release("add_1", nodes[1]);
  CHECK(add(c, nodes[4], "add", true) == "add_2");
  CHECK(t.find("add_1") == nodes[1]);
  CHECK_FALSE(t.used("add_2"));
  CHECK(add(t, nodes[5], "mul", true) == "mul");
  CHECK_FALSE(c.used("mul"));
  NameTable d;
  d = t;
  CHECK(d.size() == t.size());
  CHECK(add(d, nodes[6], "add", true) == "add_2");
  CHECK(add(t, nodes[6], "add", true) == "add_2");
}

TEST_CASE("a moved-from table is empty and usable") {
  NameTable t;
  FakeNodes nodes(8);
  add(t, nodes[0], "add", true);
  add(t, nodes[1], "add", true);
  add(t, nodes[2], "add_01");
  NameTable m = std::move(t);
  CHECK(m.size() == 3);
  CHECK(m.find("add_1") == nodes[1]);
  CHECK(m.find("add_01") == nodes[2]);
  CHECK(add(m, nodes[3], "add", true) == "add_2");
  CHECK(t.size() == 0);  // NOLINT(bugprone-use-after-move): documented state
  CHECK_FALSE(t.used("add"));
  CHECK(add(t, nodes[4], "add", true) == "add");
  NameTable n;
  add(n, nodes[5], "zzz", true);
  n = std::move(m);
  CHECK(n.size() == 4);
  CHECK_FALSE(n.used("zzz"));
  CHECK(n.find("add_2") == nodes[3]);
  CHECK(m.size() == 0);  // NOLINT(bugprone-use-after-move)
}

TEST_CASE("assign_counts carries the base counts over, not the names") {
  NameTable t;
  FakeNodes nodes(8);
  add(t, nodes[0], "add", true);
  add(t, nodes[1], "add", true);
  add(t, nodes[2], "add", true);
  t.release("add_2", nodes[2]);
  NameTable c;
  c.bind("add", nodes[3]);
  c.bind("add_1", nodes[4]);
  add(c, nodes[5], "mul_4");  // a count that t does not have: reset to 0
  c.assign_counts(t);
  CHECK(c.size() == 3);
  CHECK_FALSE(c.used("add_2"));
  CHECK(c.make_unique("add", true) == "add_3");  // count 2 carried over
  CHECK(c.make_unique("mul", true) == "mul");
  c.bind("mul", nodes[6]);
  CHECK(c.make_unique("mul", true) == "mul_1");
}

TEST_CASE("is_plain_base: legal names without a numeric suffix") {
  CHECK(NameTable::is_plain_base("add"));
  CHECK(NameTable::is_plain_base("conv2d"));
  CHECK(NameTable::is_plain_base("add_"));
  CHECK(NameTable::is_plain_base("abs"));  // reserved, but claim_derived handles that
  CHECK_FALSE(NameTable::is_plain_base("add_1"));
  CHECK_FALSE(NameTable::is_plain_base("add_01"));
  CHECK_FALSE(NameTable::is_plain_base("add.Tensor"));
  CHECK_FALSE(NameTable::is_plain_base("1abc"));
  CHECK_FALSE(NameTable::is_plain_base(""));
}

TEST_CASE("claim_derived names as make_unique(base, true) does, and bind(claim) binds there") {
  FakeNodes nodes(8);
  NameTable t;
  NameTable::Claim w;
  // Claims a name for `base` and binds it to `node`, as Graph::create_node does.
  auto claim_and_bind = [&](std::string_view base, Node* node) {
    std::string name = t.claim_derived(base, w);
    t.bind(w, name, node);
    return name;
  };
  CHECK(claim_and_bind("add", nodes[0]) == "add");
  CHECK(claim_and_bind("add", nodes[1]) == "add_1");
  t.bind("add_3", nodes[2]);  // explicit: counting goes on past it
  CHECK(claim_and_bind("add", nodes[3]) == "add_2");
  CHECK(claim_and_bind("add", nodes[4]) == "add_4");
  CHECK(claim_and_bind("abs", nodes[5]) == "abs_1");  // a builtin gets a suffix
  CHECK(t.find("add") == nodes[0]);
  CHECK(t.find("add_1") == nodes[1]);
  CHECK(t.find("add_2") == nodes[3]);
  CHECK(t.find("add_4") == nodes[4]);
  CHECK(t.find("abs_1") == nodes[5]);
  CHECK_FALSE(t.used("abs"));
  CHECK(t.size() == 6);
  // An unbound claim leaves the name free, as make_unique without bind does.
  std::string a5 = t.claim_derived("add", w);
  CHECK(a5 == "add_5");
  CHECK_FALSE(t.used("add_5"));
  CHECK(t.make_unique("add", true) == "add_6");
}

// ---------------------------------------------------------------- randomized

namespace {

struct Fuzz {
  std::mt19937_64 rng;
  std::vector<std::string> bases = {"add", "mul", "getitem", "x", "a", "_", "add_1", "abs", "sum", "input",
                                    "relu", "arg0", "Conv2D", "layer1_0"};

  explicit Fuzz(std::uint64_t seed) : rng(seed) {}
  std::size_t below(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); }
  const std::string& base() { return bases[below(bases.size())]; }

  std::string suffix() {
    switch (below(10)) {
      case 0: return std::to_string(below(8));
      case 1:
      case 2:
      case 3: return std::to_string(below(64));
      case 4: return std::to_string(below(4000));
      case 5: return std::to_string(3000 + below(200000));  // far past what is used
      case 6: return "0" + std::to_string(below(20));        // leading zeros
      case 7: {
        static const char* const big[] = {"2147483646", "2147483647", "2147483648", "4294967296",
                                          "99999999999999999", "100000000000000000", "123456789012345678901",
                                          "00", "0", "9999999999"};
        return big[below(std::size(big))];
      }
      default: return std::to_string(below(16));
    }
  }
  std::string candidate() {
    switch (below(12)) {
      case 0:
      case 1:
      case 2: return base();
      case 3:
      case 4:
      case 5:
      case 6: return base() + "_" + suffix();
      case 7: return base() + "_" + suffix() + "_" + suffix();
      case 8: {
        static const char* const illegal[] = {"add.1", "a..b", "x y", "", "1abc", "9", "!!", "add-1", "add.01",
                                              "_1", "__1", "add_", "add__3", "layer1.0.conv", "mul__", "_unnamed"};
        return illegal[below(std::size(illegal))];
      }
      case 9: {
        static const char* const reserved[] = {"abs", "sum", "max", "input", "None", "lambda", "torch", "abs_1",
                                               "sum_2"};
        return reserved[below(std::size(reserved))];
      }
      default: return base() + "_" + std::to_string(below(3));
    }
  }
};

// The two tables agree on every `stride`-th name in `names` (a mismatch is reported
// once, with the name; REQUIRE per name would dominate the run time).
void check_same(const NameTable& t, const RefTable& r, const std::vector<std::string>& names, std::size_t stride = 1) {
  REQUIRE(t.size() == r.size());
  for (std::size_t i = 0; i < names.size(); i += stride) {
    const std::string& s = names[i];
    if (t.used(s) != r.used(s) || t.find(s) != r.find(s)) FAIL("tables differ on '" << s << "'");
  }
}

void fuzz_run(std::uint64_t seed, int steps) {
  Fuzz f(seed);
  FakeNodes nodes(1024);
  NameTable t;
  RefTable r;
  std::vector<std::string> seen;  // names bound or asked about, for the final comparison
  std::vector<std::pair<std::string, Node*>> bound;
  auto random_node = [&]() -> Node* { return f.below(16) == 0 ? nullptr : nodes[f.below(1024)]; };
  // Graph's way for derived names: claim_derived, or claim_derived_by_key with
  // the key it passed along (one per base, as Graph's (kind, target) keys are).
  std::unordered_map<std::string, std::uint64_t> keys;
  auto claim_derived = [&](const std::string& base, NameTable::Claim& where) {
    const std::uint64_t key = keys.try_emplace(base, 8 * (keys.size() + 1) + 2).first->second;
    std::string out = "stale";
    if (f.below(2) == 0 && t.claim_derived_by_key(key, where, out)) return out;
    REQUIRE(out == "stale");  // not remembered: nothing claimed or written
    t.claim_derived(base, where, out, key);
    return out;
  };
  for (int step = 0; step < steps; ++step) {
    const std::size_t op = f.below(100);
    if (op < 45) {  // make_unique (mostly bound afterwards, as Graph does)
      const std::string c = f.candidate();
      const bool avoid = f.below(2) == 0;
      // Graph's fast path for derived names: claim_derived, then bind(claim, ...).
      const bool claim = avoid && NameTable::is_plain_base(c) && f.below(2) == 0;
      NameTable::Claim where;
      const std::string got = claim ? claim_derived(c, where) : t.make_unique(c, avoid);
      const std::string want = r.make_unique(c, avoid);
      REQUIRE_MESSAGE(got == want, "candidate '" << c << "' avoid_reserved " << avoid << " claim " << claim
                                                  << " step " << step);
      if (f.below(10) < 8) {
        Node* n = nodes[f.below(1024)];
        if (claim) t.bind(where, got, n);
        else t.bind(got, n);
        r.bind(got, n);
        bound.emplace_back(got, n);
        seen.push_back(got);
      }
    } else if (op < 55) {  // bind anything, sanitized or not, possibly over a used name
      std::string name = f.below(3) == 0 ? f.candidate() : NameTable::sanitize(f.candidate());
      if (!bound.empty() && f.below(4) == 0) name = bound[f.below(bound.size())].first;
      Node* n = random_node();
      t.bind(name, n);
      r.bind(name, n);
      bound.emplace_back(name, n);
      seen.push_back(name);
    } else if (op < 75) {  // release: mostly the right node
      if (bound.empty()) continue;
      const auto& [name, node] = bound[f.below(bound.size())];
      const Node* n = f.below(4) == 0 ? random_node() : node;
      t.release(name, n);
      r.release(name, n);
    } else if (op < 97) {  // find and used
      std::string name = f.below(2) == 0 || bound.empty() ? f.candidate() : bound[f.below(bound.size())].first;
      if (f.below(3) == 0) name = NameTable::sanitize(name);
      REQUIRE_MESSAGE(t.find(name) == r.find(name), name);
      REQUIRE_MESSAGE(t.used(name) == r.used(name), name);
      REQUIRE(t.size() == r.size());
      seen.push_back(std::move(name));
    } else if (op < 98) {  // a copy carries on in place of the table
      NameTable c = t;
      t = std::move(c);
    } else if (op < 99) {  // a snapshot does not change with the original
      NameTable snap = t;
      RefTable rsnap = r;
      const std::string c = f.candidate();
      t.bind(t.make_unique(c, true), nodes[0]);
      r.bind(r.make_unique(c, true), nodes[0]);
      check_same(snap, rsnap, seen, 1 + seen.size() / 500);
      REQUIRE(snap.make_unique(c, true) == rsnap.make_unique(c, true));
    } else {  // a run of derived names: long dense suffixes
      const std::string& b = f.base();
      const std::size_t k = f.below(300);
      const bool claim = NameTable::is_plain_base(b) && f.below(2) == 0;
      for (std::size_t i = 0; i < k; ++i) {
        NameTable::Claim where;
        const std::string got = claim ? claim_derived(b, where) : t.make_unique(b, true);
        REQUIRE(got == r.make_unique(b, true));
        if (claim) t.bind(where, got, nodes[i % 1024]);
        else t.bind(got, nodes[i % 1024]);
        r.bind(got, nodes[i % 1024]);
        if (i % 16 == 0) {
          t.release(got, nodes[i % 1024]);
          r.release(got, nodes[i % 1024]);
        }
        bound.emplace_back(got, nodes[i % 1024]);
      }
    }
  }
  for (const auto& [name, node] : bound) seen.push_back(name);
  check_same(t, r, seen);
  // The counts agree too: every base and candidate gets the same next name.
  for (const std::string& b : f.bases) {
    REQUIRE(t.make_unique(b, true) == r.make_unique(b, true));
    REQUIRE(t.make_unique(b, false) == r.make_unique(b, false));
  }
  for (std::size_t i = 0; i < seen.size(); i += 1 + seen.size() / 2000)
    REQUIRE(t.make_unique(seen[i], false) == r.make_unique(seen[i], false));
}

}  // namespace

TEST_CASE("claim_derived_by_key: names the base last claimed with the key, and forgets it with the table's contents") {
  FakeNodes nodes(8);
  NameTable t;
  NameTable::Claim w;
  std::string out;
  CHECK_FALSE(t.claim_derived_by_key(42, w, out));  // never claimed with 42
  CHECK(out.empty());
  t.claim_derived("mm", w, out, 42);
  CHECK(out == "mm");
  t.bind(w, out, nodes[0]);
  REQUIRE(t.claim_derived_by_key(42, w, out));
  CHECK(out == "mm_1");
  t.bind(w, out, nodes[1]);
  CHECK(t.find("mm_1") == nodes[1]);
  CHECK_FALSE(t.claim_derived_by_key(0, w, out));  // 0 is never a key
  CHECK_FALSE(t.claim_derived_by_key(42 + 31, w, out));  // same memo slot, other key
  t.claim_derived("addmm", w, out, 42 + 31);  // takes that slot over
  CHECK(out == "addmm");
  t.bind(w, out, nodes[2]);
  CHECK_FALSE(t.claim_derived_by_key(42, w, out));
  REQUIRE(t.claim_derived_by_key(42 + 31, w, out));
  CHECK(out == "addmm_1");
  t.bind(w, out, nodes[3]);
  CHECK(t.find("addmm") == nodes[2]);
  CHECK(t.find("addmm_1") == nodes[3]);
  // A copy, a moved-to table and a cleared one start without remembered keys.
  NameTable c = t;
  CHECK_FALSE(c.claim_derived_by_key(42 + 31, w, out));
  NameTable m = std::move(t);
  CHECK_FALSE(m.claim_derived_by_key(42 + 31, w, out));
  c.claim_derived("addmm", w, out, 7);
  CHECK(out == "addmm_2");  // the copy has t's names and counts
  c.clear();
  CHECK_FALSE(c.claim_derived_by_key(7, w, out));
}

TEST_CASE("randomized: NameTable agrees with the straightforward implementation") {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    CAPTURE(seed);
    fuzz_run(seed, 8000);
  }
}

TEST_CASE("randomized: one long run") { fuzz_run(20240611, 30000); }
