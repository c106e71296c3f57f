// Multi-head attention (kernels/onednn/attention.hpp) against a naive loop
// written here: the q, k, v projections, each head's scaled dot product, the
// masks, the softmax, the weighted sum and the out-projection, in double.
// F.multi_head_attention_forward (sequence first, with and without weights,
// cross-attention, separate projection weights, an unbatched query, masks),
// aten._native_multi_head_attention (batch first), aten._transformer_encoder_layer_fwd
// (post-norm relu and pre-norm gelu), and what they refuse.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "kiln/executor/compiled_graph.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::meta;
using test::random_tensor;

namespace {

constexpr const char* kMha = "torch.nn.functional.multi_head_attention_forward";

double worst_rel(const std::vector<double>& ref, const Tensor& out) {
  REQUIRE(static_cast<std::int64_t>(ref.size()) == out.numel());
  double scale = 1e-12, err = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    scale = std::max(scale, std::abs(ref[i]));
    err = std::max(err, std::abs(ref[i] - test::element(out, static_cast<std::int64_t>(i))));
  }
  return err / scale;
}

// Random values scaled by `s` (weights small enough that the softmax is not one-hot).
Tensor scaled(runtime::Shape shape, unsigned seed, float s) {
  Tensor t = random_tensor(std::move(shape), seed);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] *= s;
  return t;
}

// Token (n, t) of a [T, N, F] (sequence first) or [N, T, F] (batch first) tensor, feature f.
struct Tokens {
  const Tensor* x;
  bool batch_first;
  double operator()(std::int64_t n, std::int64_t t, std::int64_t f) const {
    const auto& s = x->shape();
    const std::int64_t F = s[2];
    return batch_first ? x->data<float>()[(n * s[1] + t) * F + f] : x->data<float>()[(t * s[1] + n) * F + f];
  }
};

// `rows` output features of x's tokens: w's rows from `row0` (w is [*, in]), b's entries from `b0`.
std::vector<double> naive_project(const Tokens& x, std::int64_t N, std::int64_t T, const Tensor& w, std::int64_t row0,
                                  std::int64_t rows, const Tensor* b, std::int64_t b0) {
  const std::int64_t in = w.shape()[1];
  std::vector<double> p(N * T * rows);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t o = 0; o < rows; ++o) {
        double acc = b ? b->data<float>()[b0 + o] : 0.0;
        for (std::int64_t e = 0; e < in; ++e) acc += x(n, t, e) * w.data<float>()[(row0 + o) * in + e];
        p[(n * T + t) * rows + o] = acc;
      }
  return p;
}

// The reference: out [N][L][E] (batch-major; the caller reorders), probs [N][H][L][S].
struct Reference {
  std::vector<double> out, probs;
};
using MaskFn = std::function<double(std::int64_t n, std::int64_t h, std::int64_t l, std::int64_t s)>;
struct Problem {
  std::int64_t N, L, S, E, H;
  std::vector<double> q, k, v;  // projected, [N][L or S][E]
  const Tensor* w_out;
  const Tensor* b_out;
  MaskFn mask;  // added to the scaled scores (-inf masks)
};
Reference naive_attention(const Problem& p) {
  const std::int64_t D = p.E / p.H;
  Reference r{std::vector<double>(p.N * p.L * p.E), std::vector<double>(p.N * p.H * p.L * p.S)};
  std::vector<double> ctx(p.N * p.L * p.E);
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t h = 0; h < p.H; ++h)
      for (std::int64_t l = 0; l < p.L; ++l) {
        std::vector<double> sc(p.S);
        double mx = -std::numeric_limits<double>::infinity();
        for (std::int64_t s = 0; s < p.S; ++s) {
          double dot = 0;
          for (std::int64_t d = 0; d < D; ++d) dot += p.q[(n * p.L + l) * p.E + h * D + d] * p.k[(n * p.S + s) * p.E + h * D + d];
          sc[s] = dot / std::sqrt(double(D)) + (p.mask ? p.mask(n, h, l, s) : 0.0);
          mx = std::max(mx, sc[s]);
        }
        double sum = 0;
        for (double& x : sc) sum += (x = std::exp(x - mx));
        for (std::int64_t s = 0; s < p.S; ++s) r.probs[((n * p.H + h) * p.L + l) * p.S + s] = sc[s] / sum;
        for (std::int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (std::int64_t s = 0; s < p.S; ++s) acc += sc[s] / sum * p.v[(n * p.S + s) * p.E + h * D + d];
          ctx[(n * p.L + l) * p.E + h * D + d] = acc;
        }
      }
  for (std::int64_t i = 0; i < p.N * p.L; ++i)
    for (std::int64_t o = 0; o < p.E; ++o) {
      double acc = p.b_out->data<float>()[o];
      for (std::int64_t e = 0; e < p.E; ++e) acc += ctx[i * p.E + e] * p.w_out->data<float>()[o * p.E + e];
      r.out[i * p.E + o] = acc;
    }
  return r;
}
// probs averaged over heads: [N][L][S].
std::vector<double> averaged(const Reference& r, std::int64_t N, std::int64_t H, std::int64_t L, std::int64_t S) {
  std::vector<double> a(N * L * S, 0.0);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < L * S; ++i) a[n * L * S + i] += r.probs[(n * H + h) * L * S + i] / double(H);
  return a;
}
// [N][T][E] reordered to [T][N][E] (a sequence-first output).
std::vector<double> seq_first(const std::vector<double>& x, std::int64_t N, std::int64_t T, std::int64_t E) {
  std::vector<double> y(x.size());
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t e = 0; e < E; ++e) y[(t * N + n) * E + e] = x[(n * T + t) * E + e];
  return y;
}

// The weights of one attention layer of embedding E.
struct Mha {
  std::int64_t E;
  Tensor w_in, b_in, w_out, b_out;
  explicit Mha(std::int64_t e, unsigned seed)
      : E(e),
        w_in(scaled({3 * e, e}, seed, 0.4f)),
        b_in(scaled({3 * e}, seed + 1, 0.2f)),
        w_out(scaled({e, e}, seed + 2, 0.4f)),
        b_out(scaled({e}, seed + 3, 0.2f)) {}
  runtime::Weights weights() const { return {{"w_in", w_in}, {"b_in", b_in}, {"w_out", w_out}, {"b_out", b_out}}; }
  // F.multi_head_attention_forward's positional arguments, as torch.fx records them.
  ArgList args(Graph& g, Node* q, Node* k, Node* v, std::int64_t heads) const {
    return ArgList{q,
                   k,
                   v,
                   E,
                   heads,
                   g.get_attr("w_in", meta({3 * E, E})),
                   g.get_attr("b_in", meta({3 * E})),
                   nullptr,
                   nullptr,
                   false,
                   0.0,
                   g.get_attr("w_out", meta({E, E})),
                   g.get_attr("b_out", meta({E}))};
  }
};

// Attention of q's tokens to k's and v's through m's packed projection.
Problem attention(const Tokens& q, const Tokens& k, const Tokens& v, std::int64_t N, std::int64_t L, std::int64_t S,
                  std::int64_t H, const Mha& m) {
  const std::int64_t E = m.E;
  Problem p{N, L, S, E, H, {}, {}, {}, &m.w_out, &m.b_out, nullptr};
  p.q = naive_project(q, N, L, m.w_in, 0, E, &m.b_in, 0);
  p.k = naive_project(k, N, S, m.w_in, E, E, &m.b_in, E);
  p.v = naive_project(v, N, S, m.w_in, 2 * E, E, &m.b_in, 2 * E);
  return p;
}
Problem self_attention(const Tokens& x, std::int64_t N, std::int64_t L, std::int64_t H, const Mha& m) {
  return attention(x, x, x, N, L, L, H, m);
}

Node* item(Graph& g, Node* n, std::int64_t i) { return g.call_function(OpRef("operator.getitem"), {n, i}); }

void check_says(const std::string& error, const char* what) { CHECK_MESSAGE(error.find(what) != std::string::npos, error); }

std::string compile_error(const Graph& g, const runtime::Weights& w) {
  try {
    (void)CompiledGraph::compile(g, w);
  } catch (const runtime::CompileError& e) {
    return e.what();
  }
  return "compiled";
}

// Self-attention of one random input of N sequences of L tokens, sequence or
// batch first: the layer's weights, the input, and the loop's problem and answer.
struct SelfAttentionCase {
  std::int64_t N, L, E, H;
  Mha m;
  Tensor tx;
  Problem p;
  Reference ref;
  SelfAttentionCase(std::int64_t n, std::int64_t l, std::int64_t e, std::int64_t h, bool batch_first, unsigned weight_seed,
                    unsigned input_seed)
      : N(n), L(l), E(e), H(h), m(e, weight_seed),
        tx(random_tensor(batch_first ? runtime::Shape{n, l, e} : runtime::Shape{l, n, e}, input_seed)),
        p(self_attention(Tokens{&tx, batch_first}, n, l, h, m)), ref(naive_attention(p)) {}
};

// need_weights' three forms: 0 the weights averaged over heads, 1 per head, 2 none.
void output_form(Graph& g, Node* mha, int form) {
  if (form < 2)
    g.output(ArgList{item(g, mha, 0), item(g, mha, 1)});
  else
    g.output(ArgList{item(g, mha, 0)});
}
void check_weights_form(const std::vector<Tensor>& out, const SelfAttentionCase& c, int form) {
  if (form == 0) {
    REQUIRE(out[1].shape() == runtime::Shape{c.N, c.L, c.L});
    CHECK(worst_rel(averaged(c.ref, c.N, c.H, c.L, c.L), out[1]) < 1e-5);
  } else if (form == 1) {
    REQUIRE(out[1].shape() == runtime::Shape{c.N, c.H, c.L, c.L});
    CHECK(worst_rel(c.ref.probs, out[1]) < 1e-5);
  } else {
    CHECK(out.size() == 1);
  }
}

}  // namespace

TEST_CASE("F.multi_head_attention_forward self-attention, sequence first, against a loop: averaged, per-head and no weights") {
  const SelfAttentionCase c(2, 5, 12, 3, false, 10, 1);
  for (int form = 0; form < 3; ++form) {
    CAPTURE(form);
    Graph g;
    Node* in = g.placeholder("x", meta({c.L, c.N, c.E}));
    Node* mha = g.call_function(OpRef(kMha), c.m.args(g, in, in, in, c.H),
                                {{"training", Arg(false)},
                                 {"need_weights", Arg(form < 2)},
                                 {"attn_mask", Arg()},
                                 {"average_attn_weights", Arg(form == 0)}});
    output_form(g, mha, form);
    auto out = CompiledGraph::compile(g, c.m.weights()).run({c.tx});
    REQUIRE(out[0].shape() == runtime::Shape{c.L, c.N, c.E});
    CHECK(worst_rel(seq_first(c.ref.out, c.N, c.L, c.E), out[0]) < 1e-5);
    check_weights_form(out, c, form);
  }
}

TEST_CASE("F.multi_head_attention_forward cross-attention: key equal to value, all three distinct, separate projection weights") {
  const std::int64_t L = 4, S = 6, N = 2, E = 8, H = 2, KD = 5, VD = 3;
  const Mha m(E, 20);
  const Tensor tq = random_tensor({L, N, E}, 2), tk = random_tensor({S, N, E}, 3), tv = random_tensor({S, N, E}, 4);
  const Tokens q{&tq, false}, k{&tk, false}, v{&tv, false};
  SUBCASE("key is value") {
    Problem p = attention(q, k, k, N, L, S, H, m);
    Graph g;
    Node* a = g.placeholder("q", meta({L, N, E}));
    Node* b = g.placeholder("k", meta({S, N, E}));
    Node* mha = g.call_function(OpRef(kMha), m.args(g, a, b, b, H), {{"training", Arg(false)}});
    g.output(ArgList{item(g, mha, 0), item(g, mha, 1)});
    auto out = CompiledGraph::compile(g, m.weights()).run({tq, tk});
    const Reference ref = naive_attention(p);
    CHECK(worst_rel(seq_first(ref.out, N, L, E), out[0]) < 1e-5);
    CHECK(worst_rel(averaged(ref, N, H, L, S), out[1]) < 1e-5);
  }
  SUBCASE("query, key and value distinct") {
    Problem p = attention(q, k, v, N, L, S, H, m);
    Graph g;
    Node* a = g.placeholder("q", meta({L, N, E}));
    Node* b = g.placeholder("k", meta({S, N, E}));
    Node* c = g.placeholder("v", meta({S, N, E}));
    Node* mha = g.call_function(OpRef(kMha), m.args(g, a, b, c, H), {{"training", Arg(false)}, {"need_weights", Arg(false)}});
    g.output(ArgList{item(g, mha, 0)});
    auto out = CompiledGraph::compile(g, m.weights()).run({tq, tk, tv});
    CHECK(worst_rel(seq_first(naive_attention(p).out, N, L, E), out[0]) < 1e-5);
  }
  SUBCASE("use_separate_proj_weight: key and value of other widths") {
    const Tensor tk2 = random_tensor({S, N, KD}, 5), tv2 = random_tensor({S, N, VD}, 6);
    const Tensor wq = scaled({E, E}, 30, 0.4f), wk = scaled({E, KD}, 31, 0.4f), wv = scaled({E, VD}, 32, 0.4f);
    const Tokens k2{&tk2, false}, v2{&tv2, false};
    Problem p{N, L, S, E, H, {}, {}, {}, &m.w_out, &m.b_out, nullptr};
    p.q = naive_project(q, N, L, wq, 0, E, &m.b_in, 0);
    p.k = naive_project(k2, N, S, wk, 0, E, &m.b_in, E);
    p.v = naive_project(v2, N, S, wv, 0, E, &m.b_in, 2 * E);
    Graph g;
    Node* a = g.placeholder("q", meta({L, N, E}));
    Node* b = g.placeholder("k", meta({S, N, KD}));
    Node* c = g.placeholder("v", meta({S, N, VD}));
    ArgList args = m.args(g, a, b, c, H);
    args[5] = Arg();  // no packed in_proj_weight
    Node* mha = g.call_function(OpRef(kMha), std::move(args),
                                {{"training", Arg(false)},
                                 {"use_separate_proj_weight", Arg(true)},
                                 {"q_proj_weight", g.get_attr("wq", meta({E, E}))},
                                 {"k_proj_weight", g.get_attr("wk", meta({E, KD}))},
                                 {"v_proj_weight", g.get_attr("wv", meta({E, VD}))}});
    g.output(ArgList{item(g, mha, 0), item(g, mha, 1)});
    runtime::Weights w = m.weights();
    w["wq"] = wq;
    w["wk"] = wk;
    w["wv"] = wv;
    auto out = CompiledGraph::compile(g, w).run({tq, tk2, tv2});
    const Reference ref = naive_attention(p);
    CHECK(worst_rel(seq_first(ref.out, N, L, E), out[0]) < 1e-5);
    CHECK(worst_rel(averaged(ref, N, H, L, S), out[1]) < 1e-5);
  }
}

TEST_CASE("F.multi_head_attention_forward of an unbatched query returns 2-d results") {
  const std::int64_t L = 5, E = 6, H = 2;
  const Mha m(E, 40);
  const Tensor tx = random_tensor({L, E}, 7);
  const Tensor t3 = Tensor::wrap(tx.data<float>(), runtime::Layout::contiguous({L, 1, E}));  // the same values as [L, 1, E]
  const Tokens x{&t3, false};
  Problem p = self_attention(x, 1, L, H, m);
  Graph g;
  Node* in = g.placeholder("x", meta({L, E}));
  Node* mha = g.call_function(OpRef(kMha), m.args(g, in, in, in, H), {{"training", Arg(false)}});
  g.output(ArgList{item(g, mha, 0), item(g, mha, 1)});
  auto out = CompiledGraph::compile(g, m.weights()).run({tx});
  REQUIRE(out[0].shape() == runtime::Shape{L, E});
  REQUIRE(out[1].shape() == runtime::Shape{L, L});
  const Reference ref = naive_attention(p);
  CHECK(worst_rel(ref.out, out[0]) < 1e-5);
  CHECK(worst_rel(averaged(ref, 1, H, L, L), out[1]) < 1e-5);
}

TEST_CASE("F.multi_head_attention_forward masks: float and bool attn_mask of 2 and 3 dims, bool and float key_padding_mask") {
  const SelfAttentionCase sa(2, 4, 8, 2, false, 50, 8);
  const std::int64_t L = sa.L, N = sa.N, E = sa.E, H = sa.H;
  Problem p = sa.p;
  const Tensor float2 = random_tensor({L, L}, 9), float3 = random_tensor({N * H, L, L}, 10),
               kpm_float = random_tensor({N, L}, 11);
  Tensor bool2 = Tensor::empty({L, L}, DType::bool_), kpm_bool = Tensor::empty({N, L}, DType::bool_);
  for (std::int64_t i = 0; i < L; ++i)
    for (std::int64_t j = 0; j < L; ++j) bool2.data<bool>()[i * L + j] = j > i;  // causal
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t s = 0; s < L; ++s) kpm_bool.data<bool>()[n * L + s] = s == L - 1 - n;
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    const char* name;
    const Tensor* attn;
    const Tensor* kpm;
    MaskFn fn;
  };
  const std::vector<Case> cases{
      {"float 2-d", &float2, nullptr, [&](auto, auto, auto l, auto s) { return double(float2.data<float>()[l * L + s]); }},
      {"float 3-d", &float3, nullptr,
       [&](auto n, auto h, auto l, auto s) { return double(float3.data<float>()[((n * H + h) * L + l) * L + s]); }},
      {"bool 2-d", &bool2, nullptr, [&](auto, auto, auto l, auto s) { return bool2.data<bool>()[l * L + s] ? -inf : 0.0; }},
      {"bool key padding", nullptr, &kpm_bool,
       [&](auto n, auto, auto, auto s) { return kpm_bool.data<bool>()[n * L + s] ? -inf : 0.0; }},
      {"float key padding", nullptr, &kpm_float,
       [&](auto n, auto, auto, auto s) { return double(kpm_float.data<float>()[n * L + s]); }},
      {"float 2-d and bool key padding", &float2, &kpm_bool,
       [&](auto n, auto, auto l, auto s) {
         return kpm_bool.data<bool>()[n * L + s] ? -inf : double(float2.data<float>()[l * L + s]);
       }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    Graph g;
    Node* in = g.placeholder("x", meta({L, N, E}));
    std::vector<Tensor> inputs{sa.tx};
    ArgDict kw{{"training", Arg(false)}};
    if (c.attn) {
      kw.set("attn_mask",
             g.placeholder("attn_mask", meta(std::vector<Dim>(c.attn->shape().begin(), c.attn->shape().end()), c.attn->dtype())));
      inputs.push_back(*c.attn);
    }
    if (c.kpm) {
      kw.set("key_padding_mask", g.placeholder("kpm", meta({N, L}, c.kpm->dtype())));
      inputs.push_back(*c.kpm);
    }
    Node* mha = g.call_function(OpRef(kMha), sa.m.args(g, in, in, in, H), std::move(kw));
    g.output(ArgList{item(g, mha, 0), item(g, mha, 1)});
    auto out = CompiledGraph::compile(g, sa.m.weights()).run(inputs);
    p.mask = c.fn;
    const Reference ref = naive_attention(p);
    CHECK(worst_rel(seq_first(ref.out, N, L, E), out[0]) < 1e-5);
    CHECK(worst_rel(averaged(ref, N, H, L, L), out[1]) < 1e-5);
  }
}

TEST_CASE("aten._native_multi_head_attention, batch first, against a loop: with averaged, per-head and no weights") {
  const SelfAttentionCase c(2, 7, 16, 4, true, 60, 12);
  for (int form = 0; form < 3; ++form) {
    CAPTURE(form);
    Graph g;
    Node* in = g.placeholder("x", meta({c.N, c.L, c.E}));
    ArgList args = c.m.args(g, in, in, in, c.H);
    args.resize(5);
    for (const char* w : {"w_in", "b_in", "w_out", "b_out"}) args.push_back(g.get_attr(w));
    args.push_back(nullptr);  // mask
    args.push_back(form < 2);
    args.push_back(form == 0);
    output_form(g, g.call_function(OpRef("aten._native_multi_head_attention.default"), std::move(args)), form);
    auto out = CompiledGraph::compile(g, c.m.weights()).run({c.tx});
    REQUIRE(out[0].shape() == runtime::Shape{c.N, c.L, c.E});
    CHECK(worst_rel(c.ref.out, out[0]) < 1e-5);
    check_weights_form(out, c, form);
  }
}

namespace {

// Layer norm of each token's E features, in place.
void naive_layer_norm(std::vector<double>& x, std::int64_t E, const Tensor& w, const Tensor& b, double eps) {
  for (std::size_t r = 0; r < x.size() / E; ++r) {
    double mean = 0, var = 0;
    for (std::int64_t e = 0; e < E; ++e) mean += x[r * E + e] / double(E);
    for (std::int64_t e = 0; e < E; ++e) var += (x[r * E + e] - mean) * (x[r * E + e] - mean) / double(E);
    for (std::int64_t e = 0; e < E; ++e)
      x[r * E + e] = (x[r * E + e] - mean) / std::sqrt(var + eps) * w.data<float>()[e] + b.data<float>()[e];
  }
}

}  // namespace

TEST_CASE("aten._transformer_encoder_layer_fwd against a loop: post-norm relu and pre-norm gelu") {
  const std::int64_t N = 2, L = 5, E = 8, H = 2, F = 12;
  const double eps = 1e-5;
  const Mha m(E, 70);
  const Tensor n1w = scaled({E}, 80, 0.5f), n1b = scaled({E}, 81, 0.5f), n2w = scaled({E}, 82, 0.5f), n2b = scaled({E}, 83, 0.5f);
  const Tensor f1w = scaled({F, E}, 84, 0.4f), f1b = scaled({F}, 85, 0.2f), f2w = scaled({E, F}, 86, 0.4f),
               f2b = scaled({E}, 87, 0.2f);
  const Tensor tx = random_tensor({N, L, E}, 13);
  for (const bool norm_first : {false, true}) {
    const bool gelu = norm_first;
    CAPTURE(norm_first);
    // The reference, step by step.
    std::vector<double> src(N * L * E);
    for (std::int64_t i = 0; i < N * L * E; ++i) src[i] = tx.data<float>()[i];
    std::vector<double> a = src;
    if (norm_first) naive_layer_norm(a, E, n1w, n1b, eps);
    Tensor ta = Tensor::empty({N, L, E});
    for (std::int64_t i = 0; i < N * L * E; ++i) ta.data<float>()[i] = static_cast<float>(a[i]);
    const Tokens x{&ta, true};
    Problem p = self_attention(x, N, L, H, m);
    std::vector<double> r = naive_attention(p).out;
    for (std::int64_t i = 0; i < N * L * E; ++i) r[i] += src[i];
    if (!norm_first) naive_layer_norm(r, E, n1w, n1b, eps);
    std::vector<double> h = r;
    if (norm_first) naive_layer_norm(h, E, n2w, n2b, eps);
    std::vector<double> y(N * L * E);
    for (std::int64_t t = 0; t < N * L; ++t) {
      std::vector<double> mid(F);
      for (std::int64_t f = 0; f < F; ++f) {
        double acc = f1b.data<float>()[f];
        for (std::int64_t e = 0; e < E; ++e) acc += h[t * E + e] * f1w.data<float>()[f * E + e];
        mid[f] = gelu ? 0.5 * acc * (1 + std::erf(acc / std::sqrt(2.0))) : std::max(acc, 0.0);
      }
      for (std::int64_t e = 0; e < E; ++e) {
        double acc = f2b.data<float>()[e];
        for (std::int64_t f = 0; f < F; ++f) acc += mid[f] * f2w.data<float>()[e * F + f];
        y[t * E + e] = r[t * E + e] + acc;
      }
    }
    if (!norm_first) naive_layer_norm(y, E, n2w, n2b, eps);

    Graph g;
    Node* in = g.placeholder("x", meta({N, L, E}));
    ArgList args{in, E, H};
    for (const char* w : {"w_in", "b_in", "w_out", "b_out"}) args.push_back(g.get_attr(w));
    args.push_back(gelu);
    args.push_back(norm_first);
    args.push_back(eps);
    for (const char* w : {"n1w", "n1b", "n2w", "n2b", "f1w", "f1b", "f2w", "f2b"}) args.push_back(g.get_attr(w));
    g.output(ArgList{g.call_function(OpRef("aten._transformer_encoder_layer_fwd.default"), std::move(args))});
    runtime::Weights w = m.weights();
    for (auto [name, t] : {std::pair<const char*, const Tensor*>{"n1w", &n1w},
                           {"n1b", &n1b},
                           {"n2w", &n2w},
                           {"n2b", &n2b},
                           {"f1w", &f1w},
                           {"f1b", &f1b},
                           {"f2w", &f2w},
                           {"f2b", &f2b}})
      w[name] = *t;
    auto out = CompiledGraph::compile(g, w).run({tx});
    REQUIRE(out[0].shape() == runtime::Shape{N, L, E});
    CHECK(worst_rel(y, out[0]) < 1e-5);
  }
}

TEST_CASE("attention kernels refuse what they do not compute, naming the node and the argument") {
  constexpr std::int64_t L = 3, N = 2, E = 4, H = 2;
  const Mha m(E, 90);
  // F.multi_head_attention_forward with one argument changed, of a query of `shape`.
  auto functional_of = [&](std::vector<Dim> shape, std::function<void(Graph&, ArgList&, ArgDict&)> change) {
    Graph g;
    Node* in = g.placeholder("x", meta(shape));
    ArgList args = m.args(g, in, in, in, H);
    ArgDict kw{{"training", Arg(false)}};
    change(g, args, kw);
    Node* mha = g.call_function(OpRef(kMha), std::move(args), std::move(kw), "attn");
    g.output(ArgList{item(g, mha, 0)});
    return compile_error(g, m.weights());
  };
  auto functional = [&](std::function<void(Graph&, ArgList&, ArgDict&)> change) { return functional_of({L, N, E}, change); };
  CHECK(functional([&](Graph&, ArgList&, ArgDict&) {}) == "compiled");
  check_says(functional([&](Graph& g, ArgList& a, ArgDict&) {
               a[7] = g.placeholder("bk", meta({1, 1, E}));
             }),
             "node attn (torch.nn.functional.multi_head_attention_forward): argument 'bias_k' is set");
  check_says(functional([&](Graph&, ArgList& a, ArgDict&) { a[9] = true; }), "argument 'add_zero_attn' is true");
  check_says(functional([&](Graph&, ArgList& a, ArgDict& kw) {
               a[10] = 0.1;
               kw.set("training", Arg(true));
             }),
             "argument 'training' is true with dropout_p > 0");
  CHECK(functional([&](Graph&, ArgList& a, ArgDict&) { a[10] = 0.1; }) == "compiled");  // dropout is off in eval
  check_says(functional([&](Graph& g, ArgList&, ArgDict& kw) {
               kw.set("static_k", g.placeholder("sk", meta({N * H, L, E / H})));
             }),
             "argument 'static_k' is set");
  check_says(functional([&](Graph&, ArgList& a, ArgDict&) { a[3] = E + 1; }), "embed_dim_to_check is 5");
  check_says(functional([&](Graph&, ArgList& a, ArgDict&) { a[4] = 3; }), "embed_dim 4 is not divisible by num_heads 3");
  check_says(functional([&](Graph& g, ArgList&, ArgDict& kw) {
               kw.set("attn_mask", g.placeholder("m", meta({L, L + 1})));
             }),
             "argument 'attn_mask' has shape [3, 4], expected [3, 3]");
  check_says(functional([&](Graph& g, ArgList&, ArgDict& kw) {
               kw.set("key_padding_mask", g.placeholder("m", meta({N, L}, DType::int64)));
             }),
             "argument 'key_padding_mask' must be float32 or bool, got int64");
  check_says(functional([&](Graph& g, ArgList&, ArgDict& kw) {
               kw.set("attn_mask", g.placeholder("m", meta({L, L})));
               kw.set("key_padding_mask", g.placeholder("p", meta({N, L})));
             }),
             "a float key_padding_mask together with attn_mask is not supported");
  check_says(functional_of({2, L, N, E}, [&](Graph&, ArgList&, ArgDict&) {}), "query, key and value must be 3-d");

  // The fused aten forms take no mask.
  {
    Graph g;
    Node* in = g.placeholder("x", meta({N, L, E}));
    Node* mask = g.placeholder("mask", meta({N, L}, DType::bool_));
    ArgList args{in, in, in, E, H};
    for (const char* w : {"w_in", "b_in", "w_out", "b_out"}) args.push_back(g.get_attr(w));
    args.push_back(mask);
    Node* mha = g.call_function(OpRef("aten._native_multi_head_attention.default"), std::move(args), {}, "native");
    g.output(ArgList{item(g, mha, 0)});
    check_says(compile_error(g, m.weights()), "node native (aten._native_multi_head_attention.default): argument 'mask' is set");
  }
  {
    Graph g;
    Node* in = g.placeholder("x", meta({N, L, E}));
    ArgList args{in, E, H};
    for (const char* w : {"w_in", "b_in", "w_out", "b_out"}) args.push_back(g.get_attr(w));
    args.push_back(false);
    args.push_back(false);
    args.push_back(1e-5);
    for (const char* w : {"b_out", "b_out", "b_out", "b_out", "w_out", "b_out", "w_out", "b_out"}) args.push_back(g.get_attr(w));
    args.push_back(g.placeholder("mask", meta({L, L}, DType::bool_)));
    g.output(ArgList{g.call_function(OpRef("aten._transformer_encoder_layer_fwd.default"), std::move(args), {}, "layer")});
    check_says(compile_error(g, m.weights()), "node layer (aten._transformer_encoder_layer_fwd.default): argument 'mask' is set");
  }
}
