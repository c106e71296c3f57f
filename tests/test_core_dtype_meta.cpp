// DType names and sizes, TensorMeta, MetaVal, and format_float_repr (Python repr of a float).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/core.hpp"

using namespace kiln;

namespace {

struct DTypeCase {
  const char* name;
  DType dtype;
  std::size_t itemsize;
  bool floating;
};

// torch: x.itemsize and x.is_floating_point for each dtype fx-graph-json names.
const std::vector<DTypeCase> kAllDTypes = {
    {"float32", DType::float32, 4, true},     {"float64", DType::float64, 8, true},
    {"float16", DType::float16, 2, true},     {"bfloat16", DType::bfloat16, 2, true},
    {"int8", DType::int8, 1, false},          {"uint8", DType::uint8, 1, false},
    {"int16", DType::int16, 2, false},        {"int32", DType::int32, 4, false},
    {"int64", DType::int64, 8, false},        {"bool", DType::bool_, 1, false},
    {"float8_e4m3fn", DType::float8_e4m3fn, 1, true}, {"complex64", DType::complex64, 8, false},
};

}  // namespace

TEST_CASE("all 12 dtype names round trip") {
  REQUIRE(kAllDTypes.size() == 12);
  for (const auto& c : kAllDTypes) {
    CAPTURE(c.name);
    auto d = dtype_from_name(c.name);
    REQUIRE(d.has_value());
    CHECK(*d == c.dtype);
    CHECK(dtype_name(c.dtype) == c.name);
    CHECK(dtype_from_name(dtype_name(c.dtype)) == c.dtype);
  }
}

TEST_CASE("dtype names are distinct") {
  for (std::size_t i = 0; i < kAllDTypes.size(); ++i)
    for (std::size_t j = i + 1; j < kAllDTypes.size(); ++j) {
      CHECK(dtype_name(kAllDTypes[i].dtype) != dtype_name(kAllDTypes[j].dtype));
      CHECK(kAllDTypes[i].dtype != kAllDTypes[j].dtype);
    }
}

TEST_CASE("dtype itemsize and is_floating_point match torch") {
  for (const auto& c : kAllDTypes) {
    CAPTURE(c.name);
    CHECK(dtype_itemsize(c.dtype) == c.itemsize);
    CHECK(is_floating_point(c.dtype) == c.floating);
  }
}

TEST_CASE("dtype functions are usable at compile time") {
  static_assert(dtype_itemsize(DType::bfloat16) == 2);
  static_assert(dtype_name(DType::bool_) == "bool");
  static_assert(dtype_from_name("int64") == DType::int64);
  static_assert(!dtype_from_name("float").has_value());
  CHECK(true);
}

TEST_CASE("unknown dtype names give nullopt") {
  for (const char* bad : {"", "float", "half", "double", "long", "torch.float32", "Float32", "float32 ", "bool_",
                          "float8_e5m2", "complex128", "uint16", "int"}) {
    CAPTURE(bad);
    CHECK_FALSE(dtype_from_name(bad).has_value());
  }
}

TEST_CASE("TensorMeta numel of static shapes") {
  TensorMeta t{{std::int64_t{2}, std::int64_t{3}, std::int64_t{4}}, DType::float32, std::nullopt};
  CHECK(t.rank() == 3);
  REQUIRE(t.numel().has_value());
  CHECK(*t.numel() == 24);

  TensorMeta scalar{{}, DType::int64, std::nullopt};
  CHECK(scalar.rank() == 0);
  CHECK(scalar.numel() == std::optional<std::int64_t>(1));  // a 0-d tensor has one element

  TensorMeta empty{{std::int64_t{5}, std::int64_t{0}}, DType::float16, std::nullopt};
  CHECK(empty.numel() == std::optional<std::int64_t>(0));
}

TEST_CASE("TensorMeta numel is nullopt when any dimension is symbolic") {
  TensorMeta t{{SymInt{"s0"}, std::int64_t{64}}, DType::float32, std::nullopt};
  CHECK(t.rank() == 2);
  CHECK_FALSE(t.numel().has_value());
  TensorMeta last{{std::int64_t{2}, std::int64_t{0}, SymInt{"s1"}}, DType::float32, std::nullopt};
  CHECK_FALSE(last.numel().has_value());  // symbolic, even though another dim is 0
  CHECK(is_static(Dim{std::int64_t{3}}));
  CHECK_FALSE(is_static(Dim{SymInt{"s0"}}));
}

TEST_CASE("TensorMeta equality covers shape, dtype and stride") {
  TensorMeta a{{std::int64_t{2}, std::int64_t{3}}, DType::float32, std::vector<Dim>{std::int64_t{3}, std::int64_t{1}}};
  TensorMeta b = a;
  CHECK(a == b);
  b.dtype = DType::float16;
  CHECK(a != b);
  b = a;
  b.stride = std::nullopt;
  CHECK(a != b);
  b = a;
  b.shape[1] = SymInt{"s0"};
  CHECK(a != b);
  CHECK(TensorMeta{}.dtype == DType::float32);
}

TEST_CASE("MetaVal kinds") {
  MetaVal none;
  CHECK(none.is_none());
  CHECK_FALSE(none.is_tensor());
  CHECK_FALSE(none.is_list());
  CHECK(none.tensor() == nullptr);
  CHECK(none.list() == nullptr);

  TensorMeta tm{{std::int64_t{4}}, DType::int32, std::nullopt};
  MetaVal t(tm);
  CHECK(t.is_tensor());
  CHECK_FALSE(t.is_none());
  REQUIRE(t.tensor() != nullptr);
  CHECK(t.tensor()->dtype == DType::int32);

  MetaVal i(std::int64_t{7});
  CHECK_FALSE(i.is_none());
  CHECK_FALSE(i.is_tensor());
  CHECK(std::get<std::int64_t>(i.value()) == 7);

  MetaVal s(SymInt{"s3"});
  CHECK(std::get<SymInt>(s.value()).name == "s3");
  CHECK_FALSE(s.is_tensor());

  MetaVal l(MetaVal::List{t, MetaVal(), i});
  CHECK(l.is_list());
  REQUIRE(l.list() != nullptr);
  REQUIRE(l.list()->size() == 3);
  CHECK((*l.list())[0].is_tensor());
  CHECK((*l.list())[1].is_none());
  CHECK(l.tensor() == nullptr);

  CHECK(t == MetaVal(tm));
  CHECK(t != i);
  CHECK(MetaVal(std::int64_t{7}) != MetaVal(std::int64_t{8}));
  CHECK(none == MetaVal());
}

TEST_CASE("NodeMeta equality includes extra JSON") {
  NodeMeta a;
  a.val = MetaVal(std::int64_t{1});
  NodeMeta b = a;
  CHECK(a == b);
  b.extra_json.emplace_back("stack_trace", "\"x\"");
  CHECK(a != b);
}

TEST_CASE("MetaVal copies share the value until one is changed through value()") {
  TensorMeta tm{{std::int64_t{4}, std::int64_t{5}}, DType::float16, std::vector<Dim>{std::int64_t{5}, std::int64_t{1}}};
  MetaVal a(tm);
  MetaVal b = a;
  CHECK(b == a);
  // Shared: both read the same TensorMeta.
  REQUIRE(a.tensor() != nullptr);
  CHECK(b.tensor() == a.tensor());

  // Changing the copy leaves the original as it was.
  std::get<TensorMeta>(b.value()).shape[0] = std::int64_t{7};
  CHECK(b != a);
  CHECK(b.tensor() != a.tensor());
  CHECK(std::get<std::int64_t>(a.tensor()->shape[0]) == 4);
  CHECK(std::get<std::int64_t>(b.tensor()->shape[0]) == 7);
  CHECK(*a.tensor() == tm);
  CHECK(b.tensor()->shape[1] == tm.shape[1]);
  CHECK(b.tensor()->stride == tm.stride);

  // And the other way round: changing the original leaves a copy alone.
  MetaVal c = a;
  std::get<TensorMeta>(a.value()).dtype = DType::bfloat16;
  CHECK(c.tensor()->dtype == DType::float16);
  CHECK(a.tensor()->dtype == DType::bfloat16);
  CHECK(c == MetaVal(tm));

  // A value no other copy shares is changed in place (no copy is made).
  MetaVal only(tm);
  const TensorMeta* before = only.tensor();
  std::get<TensorMeta>(only.value()).shape[1] = std::int64_t{9};
  CHECK(only.tensor() == before);
  CHECK(std::get<std::int64_t>(only.tensor()->shape[1]) == 9);

  // Assignment shares too, and the assigned-over value is not touched.
  MetaVal d(std::int64_t{1});
  MetaVal e(std::int64_t{2});
  e = d;
  CHECK(e == d);
  std::get<std::int64_t>(e.value()) = 3;
  CHECK(std::get<std::int64_t>(d.value()) == 1);
  CHECK(std::get<std::int64_t>(e.value()) == 3);
}

TEST_CASE("MetaVal: a default value is none, and becomes a value when assigned through value()") {
  MetaVal none;
  CHECK(none.is_none());
  const MetaVal& as_const = none;
  CHECK(std::holds_alternative<std::monostate>(as_const.value()));
  CHECK(none.is_none());  // reading it changed nothing
  MetaVal copy_before = none;

  // Non-const value() on a none value gives a monostate to assign to.
  MetaVal::Value& slot = none.value();
  CHECK(std::holds_alternative<std::monostate>(slot));
  CHECK(none.is_none());
  CHECK(none == MetaVal());  // a monostate held is the same as none
  slot = std::int64_t{3};
  CHECK_FALSE(none.is_none());
  CHECK_FALSE(none.is_tensor());
  CHECK(std::get<std::int64_t>(none.value()) == 3);
  CHECK(none == MetaVal(std::int64_t{3}));
  CHECK(none != MetaVal());
  CHECK(copy_before.is_none());  // the earlier copy is still none

  // It can become a tensor the same way.
  MetaVal t;
  t.value() = TensorMeta{{std::int64_t{2}}, DType::int8, std::nullopt};
  CHECK(t.is_tensor());
  REQUIRE(t.tensor() != nullptr);
  CHECK(t.tensor()->dtype == DType::int8);
}

TEST_CASE("MetaVal equality compares values, not storage") {
  TensorMeta tm{{SymInt{"s0"}, std::int64_t{3}}, DType::float32, std::nullopt};
  MetaVal a(tm), b(tm);
  CHECK(a.tensor() != b.tensor());  // built separately
  CHECK(a == b);
  CHECK(MetaVal(SymInt{"s1"}) == MetaVal(SymInt{"s1"}));
  CHECK(MetaVal(SymInt{"s1"}) != MetaVal(SymInt{"s2"}));
  CHECK(MetaVal(MetaVal::List{a, MetaVal(), MetaVal(std::int64_t{4})}) ==
        MetaVal(MetaVal::List{b, MetaVal(), MetaVal(std::int64_t{4})}));
  CHECK(MetaVal(MetaVal::List{a}) != MetaVal(MetaVal::List{MetaVal(std::int64_t{4})}));
  // Different kinds never compare equal, even when the value looks alike.
  CHECK(MetaVal(std::int64_t{0}) != MetaVal());
  CHECK(MetaVal(MetaVal::List{}) != MetaVal());
  // Equal after a change makes them equal again.
  MetaVal c = a;
  std::get<TensorMeta>(c.value()).dtype = DType::int32;
  CHECK(c != b);
  std::get<TensorMeta>(c.value()).dtype = DType::float32;
  CHECK(c == b);
}

TEST_CASE("MetaVal: changing an element of a copied list leaves the original list alone") {
  TensorMeta tm{{std::int64_t{8}}, DType::float32, std::nullopt};
  MetaVal list(MetaVal::List{MetaVal(tm), MetaVal(), MetaVal(std::int64_t{2})});
  MetaVal copy = list;
  CHECK(copy == list);
  // Replace an element of the copy.
  std::get<MetaVal::List>(copy.value())[2] = MetaVal(std::int64_t{5});
  CHECK(std::get<std::int64_t>((*list.list())[2].value()) == 2);
  CHECK(std::get<std::int64_t>((*copy.list())[2].value()) == 5);
  // Change an element's tensor in place, through the element's own value().
  MetaVal copy2 = list;
  MetaVal& first = std::get<MetaVal::List>(copy2.value())[0];
  std::get<TensorMeta>(first.value()).shape[0] = std::int64_t{16};
  CHECK(std::get<std::int64_t>((*list.list())[0].tensor()->shape[0]) == 8);
  CHECK(std::get<std::int64_t>((*copy2.list())[0].tensor()->shape[0]) == 16);
  CHECK(copy2 != list);
  CHECK(*(*list.list())[0].tensor() == tm);
}

TEST_CASE("NodeMeta copied between nodes: editing one node's meta.val leaves the other's") {
  Graph g;
  TensorMeta tm{{std::int64_t{2}, std::int64_t{3}}, DType::float32, std::vector<Dim>{std::int64_t{3}, std::int64_t{1}}};
  Node* a = g.placeholder("a", MetaVal(tm));
  Node* b = g.placeholder("b");
  a->meta.extra_json.emplace_back("stack_trace", "\"line 1\"");
  b->meta = a->meta;  // what a pass does when one node replaces another
  CHECK(b->meta == a->meta);
  REQUIRE(b->meta.val.is_tensor());

  std::get<TensorMeta>(b->meta.val.value()).shape[0] = std::int64_t{7};
  CHECK(b->meta != a->meta);
  CHECK(std::get<std::int64_t>(a->meta.val.tensor()->shape[0]) == 2);
  CHECK(std::get<std::int64_t>(b->meta.val.tensor()->shape[0]) == 7);
  CHECK(*a->meta.val.tensor() == tm);

  // Copy again, then edit the source: the destination keeps what it copied.
  b->meta = a->meta;
  std::get<TensorMeta>(a->meta.val.value()).dtype = DType::float64;
  CHECK(b->meta.val.tensor()->dtype == DType::float32);
  CHECK(a->meta.val.tensor()->dtype == DType::float64);
  // Replacing the whole value of one leaves the other too.
  b->meta.val = MetaVal(std::int64_t{1});
  CHECK(a->meta.val.is_tensor());
  CHECK(b->meta.extra_json == a->meta.extra_json);
}

TEST_CASE("format_float_repr matches Python repr") {
  // Expected strings from python3 -c 'print(repr(x))'.
  const std::vector<std::pair<double, const char*>> table = {
      {1.0, "1.0"},
      {0.1, "0.1"},
      {1e-05, "1e-05"},
      {0.0001, "0.0001"},
      {1e16, "1e+16"},
      {1e+22, "1e+22"},
      {123456.789, "123456.789"},
      {-2.5, "-2.5"},
      {1e-07, "1e-07"},
      {3.0e-4, "0.0003"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {5e-324, "5e-324"},
      {100.0, "100.0"},
      {1234567890123456.0, "1234567890123456.0"},
      {1e15, "1000000000000000.0"},
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {9.999999999999999e-05, "9.999999999999999e-05"},
      {12345678901234567.0, "1.2345678901234568e+16"},
      {0.5, "0.5"},
      {1.0 / 3.0, "0.3333333333333333"},
      {1e100, "1e+100"},
      {-1e-100, "-1e-100"},
      {123.456e10, "1234560000000.0"},
      {9007199254740993.0, "9007199254740992.0"},
      {1.5e300, "1.5e+300"},
      {4.35, "4.35"},
      {0.1 + 0.2, "0.30000000000000004"},
      {3e-5, "3e-05"},
      {1e-5 * 3, "3.0000000000000004e-05"},
  };
  for (const auto& [v, expected] : table) {
    CAPTURE(expected);
    CHECK(format_float_repr(v) == expected);
  }
}

TEST_CASE("format_float_repr of non-finite values matches Python") {
  CHECK(format_float_repr(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(format_float_repr(-std::numeric_limits<double>::infinity()) == "-inf");
  CHECK(format_float_repr(std::nan("")) == "nan");
}

TEST_CASE("format_float_repr output parses back to the same double") {
  for (double v : {0.1, 2.0 / 3.0, 2.5e-300, 6.02214076e23, -123.125, 1e15 + 0.5, 1e-4, 1e-5, 65504.0}) {
    std::string s = format_float_repr(v);
    CAPTURE(s);
    CHECK(std::stod(s) == v);
  }
}
