// woq_int8 (Inductor's weight-only int8 lowerings) on graphs built here: each
// of Inductor's four forms, spelled as its decomposition writes them and as
// torch's own trace does, lowered and run against the unfused graph; the near
// misses Inductor also leaves, the ones only kiln leaves (the rewrite would
// change the result), and the concat-linear form behind its option.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include <nlohmann/json.hpp>

#include "kiln/core/bfloat16.hpp"
#include "kiln/executor/compiled_graph.hpp"
#include "kiln/ops.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "kiln/passes/quantization/quantization_pipeline.hpp"
#include "quant_graph_support.hpp"
#include "quant_kernel_support.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using namespace kiln::test;
using runtime::CompiledGraph;
using runtime::Tensor;

namespace {

constexpr std::int64_t B = 2, S = 3, M = B * S, K = 40, N = 12;

// Inductor's four forms (quantization.py's _register_woq_mm_int8_pattern1..4).
enum class Form { reshape_mm_reshape, mm_reshape, bmm, transpose_then_convert };
constexpr Form kForms[] = {Form::reshape_mm_reshape, Form::mm_reshape, Form::bmm, Form::transpose_then_convert};
// The nodes each form's Inductor pattern holds.
constexpr std::int64_t form_nodes(Form f) { return f == Form::mm_reshape ? 5 : f == Form::transpose_then_convert ? 4 : 6; }

struct Options {
  bool trace_spelling = false;  // t, _to_copy, _reshape_alias/_unsafe_view instead of permute, convert, reshape
  DType x_dtype = DType::bfloat16, scales_dtype = DType::bfloat16, w_dtype = DType::int8;
  DType convert_to = DType::bfloat16;
  std::int64_t n = N;                  // out features
  std::vector<std::int64_t> scales_shape{N};
  bool identity_permute = false;       // permute [0, 1]: no transpose at all
  bool convert_read_twice = false;     // the converted weight is also an output
};

// The weight-only int8 product in `form`, `x` a placeholder, `w` and `s` constants.
Graph woq_graph(Form form, const Options& o = {}) {
  Graph g;
  const bool flat_x = form == Form::mm_reshape || form == Form::transpose_then_convert;
  const std::vector<Dim> x_shape = flat_x ? std::vector<Dim>{M, K} : std::vector<Dim>{B, S, K};
  Node* x = g.placeholder("x", meta(x_shape, o.x_dtype));
  Node* w = g.get_attr("w", meta({o.n, K}, o.w_dtype));
  Node* s = g.get_attr("s", meta(dims_of(o.scales_shape), o.scales_dtype));
  const auto convert = [&](Node* in, std::vector<Dim> shape) {
    Node* c = o.trace_spelling ? g.call_function(aten::to_copy, {in}, {{"dtype", Arg(o.convert_to)}})
                               : g.call_function(prims::convert_element_type, {in, Arg(o.convert_to)});
    return with_meta(c, std::move(shape), o.convert_to);
  };
  const auto transpose = [&](Node* in) {
    const DType d = in->meta.val.tensor()->dtype;
    if (o.identity_permute) return with_meta(g.call_function(aten::permute, {in, ArgList{0, 1}}), {o.n, K}, d);
    Node* t = o.trace_spelling ? g.call_function(aten::t, {in}) : g.call_function(aten::permute, {in, ArgList{1, 0}});
    return with_meta(t, {K, o.n}, d);
  };
  const auto reshape = [&](Node* in, std::vector<std::int64_t> shape, bool input_side) {
    const DType d = in->meta.val.tensor()->dtype;
    Node* r;
    if (!o.trace_spelling) r = g.call_function(aten::reshape, {in, ints(shape)});
    else if (input_side) r = g.call_function(aten::reshape_alias, {in, ints(shape), ints({shape[1], 1})});
    else r = g.call_function(aten::unsafe_view, {in, ints(shape)});
    return with_meta(r, dims_of(shape), d);
  };
  Node* wc = nullptr;
  Node* product = nullptr;
  switch (form) {
    case Form::reshape_mm_reshape: {
      wc = convert(w, {o.n, K});
      Node* mm = with_meta(g.call_function(aten::mm, {reshape(x, {M, K}, true), transpose(wc)}), {M, o.n}, o.x_dtype);
      product = reshape(mm, {B, S, o.n}, false);
      break;
    }
    case Form::mm_reshape: {
      wc = convert(w, {o.n, K});
      Node* mm = with_meta(g.call_function(aten::mm, {x, transpose(wc)}), {M, o.n}, o.x_dtype);
      product = reshape(mm, {B, S, o.n}, false);
      break;
    }
    case Form::bmm: {
      wc = convert(w, {o.n, K});
      Node* ex = with_meta(g.call_function(aten::expand, {x, ints({B, S, K})}), {B, S, K}, o.x_dtype);
      Node* ew = with_meta(g.call_function(aten::expand, {transpose(wc), ints({B, K, o.n})}), {B, K, o.n}, o.convert_to);
      product = with_meta(g.call_function(aten::bmm, {ex, ew}), {B, S, o.n}, o.x_dtype);
      break;
    }
    case Form::transpose_then_convert: {
      wc = convert(transpose(w), {K, o.n});
      product = with_meta(g.call_function(aten::mm, {x, wc}), {M, o.n}, o.x_dtype);
      break;
    }
  }
  std::vector<Dim> out_shape = product->meta.val.tensor()->shape;
  Node* mul = with_meta(g.call_function(aten::mul_Tensor, {product, s}), out_shape, o.x_dtype);
  ArgList outs{mul};
  if (o.convert_read_twice) outs.push_back(wc);
  g.output(outs);
  return g;
}

// `f` (float32) as `d`: itself, or rounded to bfloat16.
Tensor bf16_or_float(const Tensor& f, DType d) { return d == DType::float32 ? f : runtime::as_bfloat16(f); }
float value(const Tensor& t, std::int64_t i) {
  return t.dtype() == DType::float32 ? t.data<float>()[i] : bf16_to_float(t.data<std::uint16_t>()[i]);
}

runtime::Weights woq_weights(const Options& o = {}, std::vector<std::string> names = {"w"}, std::vector<std::int64_t> rows = {N}) {
  runtime::Weights w;
  for (std::size_t i = 0; i < names.size(); ++i)
    w.emplace(names[i], random_ints({rows[i], K}, DType::int8, -128, 127, 31 + static_cast<unsigned>(i)));
  Tensor s = random_tensor({o.scales_shape.begin(), o.scales_shape.end()}, 5);
  for (std::int64_t i = 0; i < s.numel(); ++i) s.data<float>()[i] = 0.01f + 0.002f * std::abs(s.data<float>()[i]);
  w.emplace("s", bf16_or_float(s, o.scales_dtype));
  return w;
}

// Runs `before` and `after` on one input; the largest |difference| over the largest |before|.
double run_rel_diff(const Graph& before, const Graph& after, const runtime::Weights& w, runtime::Shape x_shape, DType d) {
  const Tensor x = bf16_or_float(random_tensor(x_shape, 7), d);
  const auto want = CompiledGraph::compile(before, w).run({x});
  const auto got = CompiledGraph::compile(after, w).run({x});
  REQUIRE(got[0].shape() == want[0].shape());
  REQUIRE(got[0].dtype() == want[0].dtype());
  double scale = 0, diff = 0;
  for (std::int64_t i = 0; i < want[0].numel(); ++i) {
    scale = std::max(scale, double(std::abs(value(want[0], i))));
    diff = std::max(diff, double(std::abs(value(got[0], i) - value(want[0], i))));
  }
  return diff / scale;
}

runtime::Shape x_shape_of(const Graph& g) {
  const TensorMeta* t = g.find_nodes(OpKind::placeholder).front()->meta.val.tensor();
  runtime::Shape s;
  for (const Dim& d : t->shape) s.push_back(std::get<std::int64_t>(d));
  return s;
}

}  // namespace

TEST_CASE("woq_int8: Inductor's four forms, in its spelling and in torch's trace's, become one _weight_int8pack_mm with the same result") {
  for (const bool trace : {false, true})
    for (const Form form : kForms) {
      CAPTURE(trace);
      CAPTURE(static_cast<int>(form));
      Options o;
      o.trace_spelling = trace;
      const Graph before = woq_graph(form, o);
      Graph g = woq_graph(form, o);
      Counters c;
      REQUIRE(woq_int8(g, &c) == 1);
      lint(g);
      CHECK(c.get("woq_matcher_count") == 1);
      CHECK(c.get("woq_matcher_nodes") == form_nodes(form));
      CHECK(c.get("woq_skipped") == 0);
      CHECK(count(g, aten::weight_int8pack_mm) == 1);
      CHECK(count(g, aten::mm) + count(g, aten::bmm) + count(g, aten::mul_Tensor) == 0);
      CHECK(count(g, prims::convert_element_type) + count(g, aten::to_copy) == 0);
      // One bfloat16 rounding instead of two (the product's, then the scaled one's).
      CHECK(run_rel_diff(before, g, woq_weights(), x_shape_of(before), DType::bfloat16) <= 1.0 / 64);
    }
}

TEST_CASE("woq_int8 leaves what Inductor leaves: a float32 activation or scales, a uint8 weight, a converted weight read twice") {
  const auto unchanged = [](Form form, const Options& o) {
    Graph g = woq_graph(form, o);
    Counters c;
    CHECK(woq_int8(g, &c) == 0);
    CHECK(c.get("woq_matcher_count") == 0);
    CHECK(c.get("woq_skipped") == 0);
    CHECK(count(g, aten::weight_int8pack_mm) == 0);
  };
  for (const Form form : kForms) {
    CAPTURE(static_cast<int>(form));
    Options f32;
    f32.x_dtype = f32.scales_dtype = f32.convert_to = DType::float32;
    unchanged(form, f32);
    Options f32_scales;
    f32_scales.scales_dtype = DType::float32;
    unchanged(form, f32_scales);
    Options u8;
    u8.w_dtype = DType::uint8;
    unchanged(form, u8);
    Options shared;
    shared.convert_read_twice = true;
    unchanged(form, shared);
  }
}

TEST_CASE("woq_int8 skips, and counts, matches Inductor would rewrite into another result") {
  const auto skipped = [](Form form, const Options& o, const char* why) {
    CAPTURE(why);
    CAPTURE(static_cast<int>(form));
    Graph g = woq_graph(form, o);
    const std::string before = to_string(g);
    Counters c;
    CHECK(woq_int8(g, &c) == 0);
    CHECK(c.get("woq_skipped") == 1);
    CHECK(to_string(g) == before);
  };
  Options square;  // a square weight read untransposed: mm(x, w) is a valid product, not x @ w^T
  square.n = K;
  square.scales_shape = {K};
  square.identity_permute = true;
  skipped(Form::reshape_mm_reshape, square, "permute [0, 1]");
  skipped(Form::transpose_then_convert, square, "permute [0, 1]");
  Options one_scale;  // one scale for every column: _weight_int8pack_mm takes one per column
  one_scale.scales_shape = {1};
  for (const Form form : kForms) skipped(form, one_scale, "scales [1]");
}

TEST_CASE("woq_int8 concat-linear: three weights concatenated, only with its option, as one _weight_int8pack_mm") {
  const std::int64_t rows[] = {4, 6, 2};
  const auto build = [&] {
    Graph g;
    Node* x = g.placeholder("x", meta({M, K}, DType::bfloat16));
    ArgList parts;
    for (int i = 0; i < 3; ++i) {
      Node* w = g.get_attr("w" + std::to_string(i + 1), meta({rows[i], K}, DType::int8));
      Node* t = with_meta(g.call_function(aten::permute, {w, ArgList{1, 0}}), {K, rows[i]}, DType::int8);
      parts.push_back(with_meta(g.call_function(prims::convert_element_type, {t, Arg(DType::bfloat16)}), {K, rows[i]}, DType::bfloat16));
    }
    Node* cat = with_meta(g.call_function(aten::cat, {parts, 1}), {K, N}, DType::bfloat16);
    Node* mm = with_meta(g.call_function(aten::mm, {x, cat}), {M, N}, DType::bfloat16);
    Node* s = g.get_attr("s", meta({N}, DType::bfloat16));
    g.output(ArgList{with_meta(g.call_function(aten::mul_Tensor, {mm, s}), {M, N}, DType::bfloat16)});
    return g;
  };
  Graph off = build();
  CHECK(woq_int8(off) == 0);
  const Graph before = build();
  Graph g = build();
  Counters c;
  REQUIRE(woq_int8(g, &c, /*concat_linear=*/true) == 1);
  lint(g);
  CHECK(c.get("woq_matcher_count") == 1);
  CHECK(c.get("woq_matcher_nodes") == 9);
  CHECK(count(g, aten::weight_int8pack_mm) == 1);
  CHECK(count(g, aten::cat) == 1);  // of the int8 weights, on dim 0
  const runtime::Weights w = woq_weights({}, {"w1", "w2", "w3"}, {rows[0], rows[1], rows[2]});
  CHECK(run_rel_diff(before, g, w, {M, K}, DType::bfloat16) <= 1.0 / 64);
}

TEST_CASE("woq_int8 in kiln-opt's registry: its option, and the quantization pipeline runs it") {
  PassRegistry registry;
  register_quantization_passes(registry);
  register_quantization_pipeline(registry);
  {
    Graph g = woq_graph(Form::reshape_mm_reshape);
    PassManager pm(registry);
    pm.run(g, {"quantization"});
    CHECK(pm.counters().get("woq_matcher_count") == 1);
    CHECK(count(g, aten::weight_int8pack_mm) == 1);
  }
  Graph g = woq_graph(Form::mm_reshape);
  PassManager pm(registry);
  pm.set_options(nlohmann::json{{"woq_int8", {{"concat_linear", 1}}}});
  CHECK_THROWS_WITH(pm.run(g, {"woq_int8"}), doctest::Contains("pass woq_int8: option concat_linear must be true or false, got 1"));
}

TEST_CASE("woq_int8 on torch.export's form: the permuted weight also read by _assert_tensor_metadata, which the pipeline removes first") {
  PassRegistry registry;
  register_quantization_passes(registry);
  register_quantization_pipeline(registry);
  Graph g = woq_graph(Form::transpose_then_convert);
  Node* permute = g.find_nodes(OpKind::call_function, aten::permute).front();
  {
    auto guard = g.inserting_after(permute);
    g.call_function(OpRef("aten._assert_tensor_metadata.default"), {permute, Arg(), Arg(), Arg(DType::int8)});
  }
  Graph alone = woq_graph(Form::transpose_then_convert);
  {
    Node* p = alone.find_nodes(OpKind::call_function, aten::permute).front();
    auto guard = alone.inserting_after(p);
    alone.call_function(OpRef("aten._assert_tensor_metadata.default"), {p, Arg(), Arg(), Arg(DType::int8)});
  }
  CHECK(woq_int8(alone) == 0);  // the permute has two users: Inductor's rule leaves it
  PassManager pm(registry);
  pm.run(g, {"quantization"});
  CHECK(pm.counters().get("assert_ops_removed") == 1);
  CHECK(pm.counters().get("woq_matcher_count") == 1);
  CHECK(pm.counters().get("woq_matcher_nodes") == 4);
}

TEST_CASE("woq_int8 on torch 2.x's bmm trace: same-shape views around the expands and the product, which pointless_view drops first") {
  PassRegistry registry;
  register_quantization_passes(registry);
  register_quantization_pipeline(registry);
  // mul(_unsafe_view(bmm(view(expand(x)), view(expand(t(_to_copy(w)))))), s), every view to its input's own shape.
  const auto build = [] {
    Graph g;
    Node* x = g.placeholder("x", meta({B, S, K}, DType::bfloat16));
    Node* w = g.get_attr("w", meta({N, K}, DType::int8));
    Node* s = g.get_attr("s", meta({N}, DType::bfloat16));
    const auto same_view = [&](Node* in, OpRef op) {
      const TensorMeta* t = in->meta.val.tensor();
      ArgList dims;
      for (const Dim& d : t->shape) dims.push_back(std::get<std::int64_t>(d));
      return with_meta(g.call_function(op, {in, dims}), t->shape, t->dtype);
    };
    Node* wc = with_meta(g.call_function(aten::to_copy, {w}, {{"dtype", Arg(DType::bfloat16)}}), {N, K}, DType::bfloat16);
    Node* wt = with_meta(g.call_function(aten::t, {wc}), {K, N}, DType::bfloat16);
    Node* ex = same_view(with_meta(g.call_function(aten::expand, {x, ints({B, S, K})}), {B, S, K}, DType::bfloat16), aten::view);
    Node* ew = same_view(with_meta(g.call_function(aten::expand, {wt, ints({B, K, N})}), {B, K, N}, DType::bfloat16), aten::view);
    Node* bmm = same_view(with_meta(g.call_function(aten::bmm, {ex, ew}), {B, S, N}, DType::bfloat16), aten::unsafe_view);
    g.output(ArgList{with_meta(g.call_function(aten::mul_Tensor, {bmm, s}), {B, S, N}, DType::bfloat16)});
    return g;
  };
  Graph alone = build();
  CHECK(woq_int8(alone) == 0);  // the views stand between the forms' nodes
  const Graph before = build();
  Graph g = build();
  PassManager pm(registry);
  pm.run(g, {"quantization"});
  lint(g);
  CHECK(count(g, aten::view) + count(g, aten::unsafe_view) == 0);
  CHECK(pm.counters().get("woq_matcher_count") == 1);
  CHECK(pm.counters().get("woq_matcher_nodes") == 6);
  CHECK(pm.counters().get("pattern_matcher_count") == 4);  // three pointless views and the woq match
  CHECK(run_rel_diff(before, g, woq_weights(), {B, S, K}, DType::bfloat16) <= 1.0 / 64);
}

TEST_CASE("pointless_view drops a view to its input's own shape and keeps one that reshapes") {
  Graph g;
  Node* x = g.placeholder("x", meta({2, 6}));
  Node* same = with_meta(g.call_function(aten::view, {x, ints({2, 6})}), {2, 6}, DType::float32);
  Node* other = with_meta(g.call_function(aten::view, {same, ints({3, 4})}), {3, 4}, DType::float32);
  g.output(ArgList{other});
  Counters c;
  CHECK(pointless_view(g, &c) == 1);
  lint(g);
  CHECK(c.get("pattern_matcher_count") == 1);
  CHECK(count(g, aten::view) == 1);
  CHECK(other->arg(0).node() == x);
}
