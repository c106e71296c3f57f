// Collective bucketing (Inductor's bucketing.py and fsdp.py): the collectives'
// shape rules, bucket decisions on hand-built graphs, the merged graph's shape,
// and the merge's index arithmetic checked against each original collective by
// evaluating the view chain on synthetic per-rank data.
#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <sstream>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/c10d_meta.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/ops/prims.hpp"
#include "kiln/passes/bucketing/bucket_collectives.hpp"

using namespace kiln;
using namespace kiln::bucketing;
namespace c10d = kiln::c10d_functional;

namespace {

TensorMeta meta(std::vector<Dim> shape, DType dt = DType::float32) { return c10d_meta::contiguous(std::move(shape), dt); }

// A graph of collectives, each on its own input, each waited on and used.
struct Builder {
  Graph g;
  std::vector<Node*> outs;
  Node* input(std::vector<Dim> shape, DType dt = DType::float32) {
    return g.placeholder("p" + std::to_string(g.size()), meta(std::move(shape), dt));
  }
  Node* convert(Node* x, DType dt) {
    Node* c = g.call_function(prims::convert_element_type, {x, Arg(dt)});
    TensorMeta t = *x->meta.val.tensor();
    t.dtype = dt;
    c->meta.val = t;
    return c;
  }
  Node* with_rule(Node* n) {
    n->meta.val = *c10d_meta::infer(*n);
    return n;
  }
  Node* wait(Node* c) { return with_rule(g.call_function(c10d::wait_tensor, {c})); }
  Node* ag(Node* x, std::int64_t G = 2, const char* group = "0") {
    return wait(with_rule(g.call_function(c10d::all_gather_into_tensor, {x, Arg(G), Arg(group)})));
  }
  Node* rs(Node* x, std::int64_t G = 2, const char* op = "sum", const char* group = "0") {
    return wait(with_rule(g.call_function(c10d::reduce_scatter_tensor, {x, Arg(op), Arg(G), Arg(group)})));
  }
  Node* ar(Node* x, const char* op = "sum", const char* group = "0") {
    return wait(with_rule(g.call_function(c10d::all_reduce, {x, Arg(op), Arg(group)})));
  }
  Node* use(Node* x) {
    Node* r = g.call_function(aten::relu, {x});
    r->meta.val = x->meta.val;
    outs.push_back(r);
    return r;
  }
  void finish() {
    ArgList l;
    for (Node* o : outs) l.push_back(Arg(o));
    g.output(Arg(std::move(l)));
  }
};

const BucketingPass& pass_named(std::string_view name) {
  static const auto all = bucketing_passes();
  for (const auto& p : all)
    if (p.name == name) return p;
  throw Error("no pass " + std::string(name));
}

// The buckets as lists of the collectives' input names.
std::vector<std::vector<std::string>> plan(const Graph& g, std::string_view pass, BucketCap cap = {}) {
  const auto& p = pass_named(pass);
  std::vector<std::vector<std::string>> r;
  for (const auto& b : plan_buckets(g, p.kind, cap, p.filter)) {
    r.emplace_back();
    for (Node* c : b) r.back().push_back(c->arg(0).node()->name());
  }
  return r;
}

using Names = std::vector<std::vector<std::string>>;

bool sorted(const Graph& g) {
  for (const Node* n : g.nodes())
    for (const Node* in : n->all_input_nodes())
      if (!in->is_before(*n)) return false;
  return true;
}

}  // namespace

TEST_CASE("c10d shape rules: all_gather stacks dim 0, reduce_scatter splits it, all_reduce and wait keep the shape") {
  const TensorMeta x = meta({4, 3}, DType::bfloat16);
  CHECK(c10d_meta::all_gather_into_tensor(x, 8).shape == std::vector<Dim>{32, 3});
  CHECK(c10d_meta::all_gather_into_tensor(x, 8).dtype == DType::bfloat16);
  CHECK(c10d_meta::reduce_scatter_tensor(x, 2).shape == std::vector<Dim>{2, 3});
  CHECK(c10d_meta::all_reduce(x) == x);
  CHECK(c10d_meta::wait_tensor(x) == x);
  CHECK(c10d_meta::all_gather_into_tensor_out(x, 2, meta({8, 3}, DType::bfloat16)).shape == std::vector<Dim>{8, 3});
  CHECK_THROWS_WITH(c10d_meta::reduce_scatter_tensor(x, 3),
                    "reduce_scatter_tensor: first dimension 4 is not divisible by group_size 3");
  CHECK_THROWS_WITH(c10d_meta::all_gather_into_tensor(meta({}), 2),
                    "all_gather_into_tensor: needs an input of rank >= 1, got a 0-d tensor");
  CHECK_THROWS_WITH(c10d_meta::all_gather_into_tensor(x, 0), "all_gather_into_tensor: group_size must be >= 1, got 0");
  CHECK_THROWS_WITH(c10d_meta::all_gather_into_tensor_out(x, 2, meta({4, 3}, DType::bfloat16)),
                    "all_gather_into_tensor_out: out has shape [4, 3] bfloat16, the gathered input needs [8, 3] bfloat16");
}

TEST_CASE("c10d shape rules read a node's arguments, the _out form its out keyword, and errors name the node") {
  Builder b;
  Node* x = b.input({4, 3});
  Node* buf = b.g.placeholder("buf", meta({8, 3}));
  Node* ag_out = b.g.call_function(c10d::all_gather_into_tensor_out, {x, Arg(2), Arg("0")}, ArgDict{{"out", Arg(buf)}});
  CHECK(c10d_meta::infer(*ag_out)->shape == std::vector<Dim>{8, 3});
  Node* rs = b.g.call_function(c10d::reduce_scatter_tensor, {x, Arg("sum"), Arg(3), Arg("0")}, {}, "rs");
  CHECK_THROWS_WITH(c10d_meta::infer(*rs),
                    "node rs: reduce_scatter_tensor: first dimension 4 is not divisible by group_size 3");
  Node* bad = b.g.call_function(c10d::all_reduce, {Arg(1), Arg("sum"), Arg("0")}, {}, "bad");
  CHECK_THROWS_WITH(c10d_meta::infer(*bad), "node bad: input is not a node");
  CHECK_FALSE(c10d_meta::infer(*x).has_value());
}

TEST_CASE("bucket_all_gather merges a run into one flat all_gather whose views replace each wait, sorted and linted") {
  Builder b;
  Node* p0 = b.input({4, 3});
  Node* p1 = b.input({5});
  Node* w0 = b.ag(p0);
  b.use(w0);  // a user before the last collective: moved after the merged wait
  Node* w1 = b.ag(p1);
  b.use(w1);
  b.finish();
  Counters c;
  std::ostringstream log;
  CHECK(bucket_collectives(b.g, pass_named("bucket_all_gather"), {}, &c, &log) == 1);
  lint(b.g);
  CHECK(sorted(b.g));
  CHECK(c.get("bucket_all_gather_buckets") == 1);
  CHECK(c.get("bucket_all_gather_collectives") == 2);
  CHECK(log.str() == "bucket_all_gather: 2 all_gather_into_tensor collectives into 1 buckets\n");
  auto ags = b.g.find_nodes(OpKind::call_function, c10d::all_gather_into_tensor);
  REQUIRE(ags.size() == 1);
  CHECK(ags[0]->meta.val.tensor()->shape == std::vector<Dim>{34});
  CHECK(ags[0]->arg(0).node()->is_call(aten::cat));
  CHECK(b.g.find_nodes(OpKind::call_function, c10d::wait_tensor).size() == 1);
  for (Node* u : b.outs) {
    Node* view = u->arg(0).node();
    CHECK(view->is_call(aten::reshape));
    CHECK(view->meta.val.tensor()->shape == (u == b.outs[0] ? std::vector<Dim>{8, 3} : std::vector<Dim>{10}));
  }
}

TEST_CASE("bucketing caps: a number in MB, a list read at bucket index 0 per run as Inductor does, and bad options") {
  Builder b;
  std::vector<Node*> ps;
  for (int i = 0; i < 5; ++i) ps.push_back(b.input({64 * 1024}));  // 256 KB in, 512 KB gathered
  for (Node* p : ps) b.use(b.ag(p));
  b.finish();
  // The gathered size counts: 512 KB each, so 1 MB holds two.
  CHECK(plan(b.g, "bucket_all_gather", BucketCap({1.0})) == Names{{"p0", "p1"}, {"p2", "p3"}});
  CHECK(plan(b.g, "bucket_all_gather", BucketCap({1.5})) == Names{{"p0", "p1", "p2"}, {"p3", "p4"}});
  CHECK(plan(b.g, "bucket_all_gather", BucketCap({0.5})).empty());  // every bucket of one
  CHECK(plan(b.g, "bucket_all_gather") == Names{{"p0", "p1", "p2", "p3", "p4"}});
  CHECK(plan(b.g, "bucket_all_gather", BucketCap({1.0, 100.0})) == plan(b.g, "bucket_all_gather", BucketCap({1.0})));
  CHECK(plan(b.g, "bucket_all_gather", BucketCap({100.0, 1.0})) == Names{{"p0", "p1", "p2", "p3", "p4"}});
  CHECK(BucketCap::from_options(nlohmann::json::parse(R"({"bucket_cap_mb": [3, 4]})"), "x").mb(5) == 4.0);
  CHECK(BucketCap::from_options(nlohmann::json::object(), "x").mb(0) == 2000.0);
  CHECK_THROWS_WITH(BucketCap::from_options(nlohmann::json::parse(R"({"bucket_cap_mb": []})"), "bucket_all_gather"),
                    "pass bucket_all_gather: option bucket_cap_mb must be a number > 0 or a non-empty list of them, got []");
  CHECK_THROWS_WITH(BucketCap::from_options(nlohmann::json::parse(R"({"bucket_cap_mb": "a"})"), "p"),
                    "pass p: option bucket_cap_mb must be a number > 0 or a non-empty list of them, got \"a\"");
}

TEST_CASE("bucketing keys: group name and dtype for all_gather, and the reduce op for reduce_scatter and all_reduce") {
  Builder b;
  Node* a = b.input({8});
  Node* c = b.input({8});
  Node* d = b.input({8}, DType::bfloat16);
  Node* e = b.input({8}, DType::bfloat16);
  Node* f = b.input({8});
  Node* h = b.input({8});
  b.use(b.ag(a));
  b.use(b.ag(c));
  b.use(b.ag(d));  // another dtype: a new run
  b.use(b.ag(e));
  b.use(b.ag(f, 2, "1"));  // another group
  b.use(b.ag(h));          // back to group 0: a run of one
  b.use(b.rs(a));
  b.use(b.rs(c, 2, "avg"));
  b.use(b.rs(f, 2, "avg"));
  b.use(b.ar(a, "max"));
  b.use(b.ar(c, "max"));
  b.use(b.ar(f, "sum"));
  b.finish();
  CHECK(plan(b.g, "bucket_all_gather") == Names{{"p0", "p1"}, {"p2", "p3"}});
  CHECK(plan(b.g, "bucket_reduce_scatter") == Names{{"p1", "p4"}});
  CHECK(plan(b.g, "bucket_all_reduce") == Names{{"p0", "p1"}});
}

TEST_CASE("bucketing skips a collective that depends on a member of the current bucket, and leaves a single one alone") {
  Builder b;
  Node* p0 = b.input({8});
  Node* p1 = b.input({8});
  Node* p2 = b.input({8});
  Node* w0 = b.ag(p0);
  Node* w1 = b.ag(p1);
  Node* w2 = b.ag(p2);
  Node* dep = b.g.call_function(aten::slice_Tensor, {w0, Arg(0), Arg(0), Arg(8)}, {}, "dep");
  dep->meta.val = meta({8});
  Node* w3 = b.ag(dep);  // depends on the first collective
  for (Node* w : {w1, w2, w3}) b.use(w);
  b.finish();
  // One bucket for all: the dependent one is skipped and stays as it is.
  CHECK(plan(b.g, "bucket_all_gather") == Names{{"p0", "p1", "p2"}});
  // 64 bytes each, room for two: the first bucket has closed when it comes, so it joins the second.
  const BucketCap two({128.0 / (1024 * 1024)});
  CHECK(plan(b.g, "bucket_all_gather", two) == Names{{"p0", "p1"}, {"p2", "dep"}});
  CHECK(bucket_collectives(b.g, pass_named("bucket_all_gather"), two) == 2);
  lint(b.g);
  CHECK(sorted(b.g));
  CHECK(b.g.find_nodes(OpKind::call_function, c10d::all_gather_into_tensor).size() == 2);

  Builder one;
  one.use(one.ag(one.input({8})));
  one.use(one.rs(one.input({8})));
  one.finish();
  const std::size_t before = one.g.size();
  CHECK(bucket_collectives(one.g, pass_named("bucket_all_gather")) == 0);
  CHECK(bucket_collectives(one.g, pass_named("bucket_reduce_scatter")) == 0);
  CHECK(one.g.size() == before);
}

TEST_CASE("bucketing merges a bucket whose member gathers the wait of an earlier bucket's member") {
  Builder b;
  Node* p0 = b.input({4});
  Node* p1 = b.input({8});
  Node* p2 = b.input({8});
  Node* w0 = b.ag(p0);  // 32 bytes gathered
  b.use(b.ag(p1));      // 64
  b.use(b.ag(p2));      // 64: the first bucket is full at 128
  b.use(b.ag(w0));      // 64, reads the first bucket's wait: joins the second
  b.finish();
  const BucketCap cap({128.0 / (1024 * 1024)});
  CHECK(plan(b.g, "bucket_all_gather", cap) == Names{{"p0", "p1"}, {"p2", "wait_tensor"}});
  CHECK(bucket_collectives(b.g, pass_named("bucket_all_gather"), cap) == 2);
  lint(b.g);
  CHECK(sorted(b.g));
  auto ags = b.g.find_nodes(OpKind::call_function, c10d::all_gather_into_tensor);
  REQUIRE(ags.size() == 2);
  // The second bucket's buffer flattens the first bucket's view of p0's result.
  const Node* cat2 = ags[1]->arg(0).node();
  const Node* flat_view = cat2->arg(0).list()->at(1).node();
  CHECK(flat_view->arg(0).node()->is_call(aten::reshape));
  CHECK(flat_view->arg(0).node()->meta.val.tensor()->shape == std::vector<Dim>{8});
}

TEST_CASE("bucket_fsdp_all_gather takes all-gathers of graph inputs or of a convert of one, and folds the convert") {
  Builder b;
  Node* p0 = b.input({8});
  Node* p1 = b.input({8});
  Node* p2 = b.input({8});
  Node* p3 = b.input({8}, DType::bfloat16);
  b.use(b.ag(b.convert(p0, DType::bfloat16)));
  b.use(b.ag(p3));
  Node* r = b.g.call_function(aten::relu, {p1});
  r->meta.val = p1->meta.val;
  b.use(b.ag(b.convert(r, DType::bfloat16)));  // a convert of a computed value: not FSDP
  b.use(b.ag(b.convert(p2, DType::bfloat16)));
  b.finish();
  // The near miss does not break the run: the filter drops its wait before the keys are compared.
  CHECK(plan(b.g, "bucket_fsdp_all_gather") == Names{{"convert_element_type", "p3", "convert_element_type_2"}});
  CHECK(plan(b.g, "bucket_all_gather") == Names{{"convert_element_type", "p3", "convert_element_type_1", "convert_element_type_2"}});
  CHECK(bucket_collectives(b.g, pass_named("bucket_fsdp_all_gather")) == 1);
  lint(b.g);
  CHECK(sorted(b.g));
  // The folded convert now converts the flattened input.
  auto converts = b.g.find_nodes(OpKind::call_function, prims::convert_element_type);
  CHECK(converts.size() == 3);
  int folded = 0;
  for (Node* cv : converts)
    if (Node* in = cv->arg(0).node(); in->is_call(aten::reshape) && (in->arg(0).node() == p0 || in->arg(0).node() == p2))
      ++folded;
  CHECK(folded == 2);
}

TEST_CASE("bucket_fsdp_reduce_scatter takes reduce-scatters whose wait feeds only outputs, possibly through one convert") {
  Builder b;
  std::vector<Node*> ps;
  for (int i = 0; i < 6; ++i) ps.push_back(b.input({8}));
  b.outs.push_back(b.rs(ps[0]));                            // output
  b.outs.push_back(b.convert(b.rs(ps[1]), DType::bfloat16));  // convert -> output
  b.use(b.rs(ps[2]));                                       // relu: not FSDP
  Node* w3 = b.rs(ps[3]);
  b.use(b.convert(w3, DType::bfloat16));  // convert -> relu: not FSDP
  Node* w4 = b.rs(ps[4]);
  b.outs.push_back(w4);
  b.outs.push_back(b.convert(w4, DType::bfloat16));  // two users: not FSDP
  b.rs(ps[5]);  // no users: feeds only outputs, vacuously
  b.finish();
  CHECK(plan(b.g, "bucket_fsdp_reduce_scatter") == Names{{"p0", "p1", "p5"}});
  CHECK(plan(b.g, "bucket_reduce_scatter") == Names{{"p0", "p1", "p2", "p3", "p4", "p5"}});
}

TEST_CASE("bucketing takes all_gather_into_tensor_out as Inductor 2.11 does, unless its out buffer is read elsewhere") {
  {
    Builder b;
    Node* p0 = b.input({8});
    Node* p1 = b.input({8});
    Node* p2 = b.input({8});
    Node* buf = b.input({16});
    b.use(b.ag(p0));
    b.use(b.wait(b.with_rule(
        b.g.call_function(c10d::all_gather_into_tensor_out, {p1, Arg(2), Arg("0")}, ArgDict{{"out", Arg(buf)}}))));
    b.use(b.ag(p2));
    b.finish();
    CHECK(plan(b.g, "bucket_all_gather") == Names{{"p0", "p1", "p2"}});
    CHECK(bucket_collectives(b.g, pass_named("bucket_all_gather")) == 1);
    lint(b.g);
    CHECK(buf->num_users() == 0);  // the merged collective writes its own buffer
  }
  {
    // `out` is read after the wait: merging would leave it unwritten, so it stays, and its wait does not break the run.
    Builder b;
    Node* p0 = b.input({8});
    Node* p1 = b.input({8});
    Node* p2 = b.input({8});
    Node* buf = b.input({16});
    b.use(b.ag(p0));
    b.use(b.wait(b.with_rule(
        b.g.call_function(c10d::all_gather_into_tensor_out, {p1, Arg(2), Arg("0")}, ArgDict{{"out", Arg(buf)}}))));
    b.use(buf);
    b.use(b.ag(p2));
    b.finish();
    CHECK(plan(b.g, "bucket_all_gather") == Names{{"p0", "p2"}});
  }
}

TEST_CASE("bucketing changes nothing when a bucket cannot be merged, and says which node") {
  Builder b;
  Node* p0 = b.input({8});
  Node* p1 = b.input({8});
  b.use(b.ag(p0, 2));
  b.use(b.ag(p1, 4));  // same group name, another group size
  b.finish();
  const std::string before = to_string(b.g);
  CHECK_THROWS_WITH(bucket_collectives(b.g, pass_named("bucket_all_gather")),
                    "node all_gather_into_tensor_1: group_size 4 differs from the bucket's 2");
  CHECK(to_string(b.g) == before);

  Builder wrong;
  wrong.use(wrong.ag(wrong.input({8})));
  Node* bad = wrong.ag(wrong.input({8}));
  bad->arg(0).node()->meta.val = meta({8});  // the collective's recorded shape disagrees with its input
  wrong.use(bad);
  wrong.finish();
  const std::string wrong_before = to_string(wrong.g);
  CHECK_THROWS_WITH(bucket_collectives(wrong.g, pass_named("bucket_all_gather")),
                    "node all_gather_into_tensor_1: its meta shape [8] is not what its input gives, [16]");
  CHECK(to_string(wrong.g) == wrong_before);

  Builder two;
  Node* c = two.g.call_function(c10d::all_gather_into_tensor, {two.input({8}), Arg(2), Arg("0")});
  two.with_rule(c);
  two.use(two.wait(c));
  two.use(c);  // a second user besides its wait
  two.use(two.ag(two.input({8})));
  two.finish();
  CHECK_THROWS_WITH(bucket_collectives(two.g, pass_named("bucket_all_gather")),
                    "node all_gather_into_tensor: bucketing needs its wait as the only user of a collective, it has 2");
}

TEST_CASE("bucketing passes are registered by name and read bucket_cap_mb") {
  PassRegistry r;
  register_bucketing_passes(r);
  for (const char* name : {"bucket_all_gather", "bucket_reduce_scatter", "bucket_all_reduce", "bucket_fsdp_all_gather",
                           "bucket_fsdp_reduce_scatter"})
    CHECK(r.find(name));
  Builder b;
  for (int i = 0; i < 3; ++i) b.use(b.ag(b.input({64 * 1024})));
  b.finish();
  Counters c;
  const auto options = nlohmann::json::parse(R"({"bucket_cap_mb": 1})");
  PassContext ctx{c, options};
  CHECK(r.get("bucket_all_gather").run(b.g, ctx));
  CHECK(c.get("bucket_all_gather_buckets") == 1);
  CHECK(c.get("bucket_all_gather_collectives") == 2);
  lint(b.g);
}

namespace {

// A tiny evaluator of the merge's view chain (reshape, cat, split_with_sizes,
// getitem, convert) on row-major data, to check its index arithmetic without a runtime.
struct Val {
  std::vector<std::int64_t> shape;
  std::vector<double> data;
};

std::vector<std::int64_t> ints(const Arg& a) {
  std::vector<std::int64_t> v;
  for (const Arg& x : *a.list()) v.push_back(*x.get_if<std::int64_t>());
  return v;
}

std::int64_t numel(const std::vector<std::int64_t>& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// Slices columns [c0, c0 + w) of a [rows, cols] value, or [c0, c0 + w) of a 1-d one.
Val columns(const Val& x, std::int64_t c0, std::int64_t w) {
  const std::int64_t rows = x.shape.size() == 2 ? x.shape[0] : 1, cols = x.shape.back();
  Val r{x.shape.size() == 2 ? std::vector<std::int64_t>{rows, w} : std::vector<std::int64_t>{w}, {}};
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t k = 0; k < w; ++k) r.data.push_back(x.data[static_cast<std::size_t>(i * cols + c0 + k)]);
  return r;
}

struct Evaluator {
  std::map<const Node*, Val> vals;
  std::map<const Node*, std::vector<Val>> lists;
  bool has(const Node* n) const { return vals.contains(n) || lists.contains(n); }
  void run(const Graph& g) {
    for (const Node* n : g.nodes()) {
      if (has(n) || n->op() != OpKind::call_function) continue;
      bool ready = !n->all_input_nodes().empty();
      for (const Node* in : n->all_input_nodes()) ready = ready && has(in);
      if (ready) eval(n);
    }
  }
  void eval(const Node* n) {
    if (n->is_call(aten::reshape)) {
      Val v = vals.at(n->arg(0).node());
      auto shape = ints(n->arg(1));
      std::int64_t known = 1;
      for (auto d : shape) known *= d == -1 ? 1 : d;
      for (auto& d : shape)
        if (d == -1) d = static_cast<std::int64_t>(v.data.size()) / known;
      v.shape = shape;
      vals[n] = v;
    } else if (n->is_call(prims::convert_element_type)) {
      vals[n] = vals.at(n->arg(0).node());
    } else if (n->is_call(aten::cat)) {
      const std::int64_t dim = n->args().size() > 1 ? *n->arg(1).get_if<std::int64_t>() : 0;
      std::vector<Val> parts;
      for (const Arg& a : *n->arg(0).list()) parts.push_back(vals.at(a.node()));
      Val r;
      if (dim == 0) {
        for (const Val& p : parts) r.data.insert(r.data.end(), p.data.begin(), p.data.end());
        r.shape = {static_cast<std::int64_t>(r.data.size())};
      } else {
        const std::int64_t rows = parts[0].shape[0];
        std::int64_t cols = 0;
        for (const Val& p : parts) cols += p.shape[1];
        for (std::int64_t i = 0; i < rows; ++i)
          for (const Val& p : parts)
            for (std::int64_t k = 0; k < p.shape[1]; ++k) r.data.push_back(p.data[static_cast<std::size_t>(i * p.shape[1] + k)]);
        r.shape = {rows, cols};
      }
      vals[n] = r;
    } else if (n->is_call(aten::split_with_sizes)) {
      const Val& x = vals.at(n->arg(0).node());
      std::int64_t c0 = 0;
      for (auto w : ints(n->arg(1))) {
        lists[n].push_back(columns(x, c0, w));
        c0 += w;
      }
    } else if (n->is_call(pyop::getitem)) {
      vals[n] = lists.at(n->arg(0).node()).at(static_cast<std::size_t>(*n->arg(1).get_if<std::int64_t>()));
    }
  }
};

// Rank r's value of input j, element k.
double datum(std::int64_t r, std::size_t j, std::int64_t k) { return 1000.0 * double(r) + 100.0 * double(j) + double(k); }

std::vector<double> flat_input(std::int64_t r, std::size_t j, std::int64_t n) {
  std::vector<double> v;
  for (std::int64_t k = 0; k < n; ++k) v.push_back(datum(r, j, k));
  return v;
}

struct Merged {
  Builder b;
  std::vector<Node*> inputs;
  std::vector<std::vector<std::int64_t>> shapes;
  Node* coll = nullptr;
  Merged(std::vector<std::vector<std::int64_t>> in_shapes, std::int64_t G, std::string_view pass) : shapes(in_shapes) {
    for (const auto& s : shapes) inputs.push_back(b.input(std::vector<Dim>(s.begin(), s.end())));
    for (Node* x : inputs) {
      const auto& p = pass_named(pass);
      b.use(p.kind == Collective::all_gather ? b.ag(x, G) : p.kind == Collective::reduce_scatter ? b.rs(x, G) : b.ar(x));
    }
    b.finish();
    REQUIRE(bucket_collectives(b.g, pass_named(pass)) == 1);
    lint(b.g);
    for (Node* n : b.g.nodes())
      if (n->op() == OpKind::call_function && std::string(n->target_name()).starts_with("_c10d_functional.") &&
          !n->is_call(c10d::wait_tensor))
        coll = n;
    REQUIRE(coll);
  }
  // The flat buffer the merged collective gets on rank r.
  Val buffer(std::int64_t r) {
    Evaluator e;
    for (std::size_t j = 0; j < inputs.size(); ++j) e.vals[inputs[j]] = Val{shapes[j], flat_input(r, j, numel(shapes[j]))};
    e.run(b.g);
    return e.vals.at(coll->arg(0).node());
  }
  // What each original wait's users now read, given the merged wait's value.
  std::vector<Val> outputs(const Val& waited_value) {
    Evaluator e;
    e.vals[*coll->users().begin()] = waited_value;
    e.run(b.g);
    std::vector<Val> r;
    for (Node* u : b.outs) r.push_back(e.vals.at(u->arg(0).node()));
    return r;
  }
};

}  // namespace

TEST_CASE("bucketed all_gather: the rank-major buffer's views give each input's own all_gather result") {
  const std::int64_t G = 3;
  Merged m({{2, 3}, {4}, {1, 2, 2}}, G, "bucket_all_gather");
  Val gathered;
  for (std::int64_t r = 0; r < G; ++r) {
    Val part = m.buffer(r);
    gathered.data.insert(gathered.data.end(), part.data.begin(), part.data.end());
  }
  gathered.shape = {static_cast<std::int64_t>(gathered.data.size())};
  const auto outs = m.outputs(gathered);
  for (std::size_t j = 0; j < m.shapes.size(); ++j) {
    std::vector<std::int64_t> want_shape = m.shapes[j];
    want_shape[0] *= G;
    std::vector<double> want;  // all_gather: rank 0's input, then rank 1's, ...
    for (std::int64_t r = 0; r < G; ++r) {
      auto v = flat_input(r, j, numel(m.shapes[j]));
      want.insert(want.end(), v.begin(), v.end());
    }
    CHECK(outs[j].shape == want_shape);
    CHECK(outs[j].data == want);
  }
}

TEST_CASE("bucketed reduce_scatter and all_reduce: the views give each input's own result on every rank") {
  const std::int64_t G = 2;
  Merged m({{4, 3}, {2}, {6, 1}}, G, "bucket_reduce_scatter");
  std::vector<Val> bufs;
  for (std::int64_t q = 0; q < G; ++q) bufs.push_back(m.buffer(q));
  const std::int64_t chunk = static_cast<std::int64_t>(bufs[0].data.size()) / G;
  for (std::int64_t r = 0; r < G; ++r) {
    Val mine{{chunk}, std::vector<double>(static_cast<std::size_t>(chunk), 0.0)};
    for (const Val& buf : bufs)
      for (std::int64_t k = 0; k < chunk; ++k) mine.data[static_cast<std::size_t>(k)] += buf.data[static_cast<std::size_t>(r * chunk + k)];
    const auto outs = m.outputs(mine);
    for (std::size_t j = 0; j < m.shapes.size(); ++j) {
      const std::int64_t n = numel(m.shapes[j]) / G;
      std::vector<double> want(static_cast<std::size_t>(n), 0.0);  // the sum over ranks of chunk r of input j
      for (std::int64_t q = 0; q < G; ++q)
        for (std::int64_t k = 0; k < n; ++k) want[static_cast<std::size_t>(k)] += datum(q, j, r * n + k);
      std::vector<std::int64_t> want_shape = m.shapes[j];
      want_shape[0] /= G;
      CHECK(outs[j].shape == want_shape);
      CHECK(outs[j].data == want);
    }
  }

  Merged a({{4, 3}, {2}}, 1, "bucket_all_reduce");
  Val sum = a.buffer(0);
  const Val other = a.buffer(1);
  for (std::size_t k = 0; k < sum.data.size(); ++k) sum.data[k] += other.data[k];
  const auto outs = a.outputs(sum);
  for (std::size_t j = 0; j < a.shapes.size(); ++j) {
    std::vector<double> want;
    for (std::int64_t k = 0; k < numel(a.shapes[j]); ++k) want.push_back(datum(0, j, k) + datum(1, j, k));
    CHECK(outs[j].shape == a.shapes[j]);
    CHECK(outs[j].data == want);
  }
}
