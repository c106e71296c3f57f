// shard_parameters on hand-built graphs: which weights become shards, where
// their all-gathers go, the shard values of every rank against the weight
// itself, world_size 1, a weight read twice, the options' errors, and
// bucket_fsdp_all_gather merging the all-gathers it makes.
#include <doctest/doctest.h>

#include <numeric>
#include <sstream>

#include "kiln/core.hpp"
#include "kiln/io/fx_json_read.hpp"
#include "kiln/io/npy_weights.hpp"
#include "kiln/io/weight_store.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/c10d_meta.hpp"
#include "kiln/passes/bucketing/bucket_collectives.hpp"
#include "kiln/passes/pass_manager.hpp"
#include "kiln/passes/sharding/shard_parameters.hpp"
#include "tool_test_support.hpp"

using namespace kiln;
namespace c10d = kiln::c10d_functional;

namespace {

TensorMeta meta(std::vector<std::int64_t> shape, DType dt = DType::float32) {
  return c10d_meta::contiguous(std::vector<Dim>(shape.begin(), shape.end()), dt);
}

std::vector<float> iota(std::int64_t n, float from = 1) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

// x + w1 (get_attr "fc.weight" [2, 4]), then + w2 (a placeholder bound to
// "fc.bias" [5]): one weight needs a reshape, the other a slice of its padding.
struct Model {
  Graph g;
  io::WeightStore store;
  Node* x = nullptr;
  Node* first_use = nullptr;
  Node* second_use = nullptr;
  Model() {
    store.add("fc.weight", io::make_weight<float>({2, 4}, iota(8)));
    store.add("fc.bias", io::make_weight<float>({5}, iota(5, 100)));
    x = g.placeholder("x", meta({2, 4}));
    Node* b = g.placeholder("fc.bias", meta({5}));
    Node* relu = g.call_function(aten::relu, {x});
    relu->meta.val = meta({2, 4});
    Node* w = g.get_attr("fc.weight", meta({2, 4}));
    first_use = g.call_function(aten::add_Tensor, {relu, w});
    first_use->meta.val = meta({2, 4});
    second_use = g.call_function(aten::add_Tensor, {first_use, b});
    second_use->meta.val = meta({2, 4});
    g.output(Arg(ArgList{Arg(second_use)}));
  }
};

sharding::ShardReport shard(Graph& g, io::WeightStore& store, std::int64_t n, std::int64_t r) {
  sharding::ShardOptions o;
  o.world_size = n;
  o.rank = r;
  return sharding::shard_parameters(g, store, o);
}

std::size_t count(const Graph& g, OpRef op) {
  std::size_t c = 0;
  for (const Node* n : g.nodes()) c += n->is_call(op);
  return c;
}

bool sorted(const Graph& g) {
  for (const Node* n : g.nodes())
    for (const Node* in : n->all_input_nodes())
      if (!in->is_before(*n)) return false;
  return true;
}

// The chain from a shard placeholder to what replaced the weight, by target.
std::vector<std::string> chain(const Node* shard) {
  std::vector<std::string> targets;
  for (const Node* n = shard; n->num_users() == 1 && (*n->users().begin())->op() == OpKind::call_function;) {
    n = *n->users().begin();
    if (n->is_call(aten::add_Tensor)) break;
    targets.emplace_back(n->target_name());
  }
  return targets;
}

Node* placeholder(const Graph& g, std::string_view target) {
  for (Node* n : g.nodes())
    if (n->op() == OpKind::placeholder && n->target_name() == target) return n;
  return nullptr;
}

Counters run_pass(Graph& g, io::WeightStore* store, const nlohmann::json& options, std::ostream* log = nullptr) {
  PassRegistry r;
  register_sharding_passes(r);
  PassManager pm(r);
  pm.set_options({{"shard_parameters", options}});
  pm.set_weights(store);
  pm.set_log(log);
  pm.run(g, {"shard_parameters"});
  return pm.counters();
}

std::string error_of(const nlohmann::json& options, bool with_weights = true) {
  Model m;
  try {
    run_pass(m.g, with_weights ? &m.store : nullptr, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("shard_parameters makes each weight a shard placeholder gathered right before its first use") {
  Model m;
  const auto report = shard(m.g, m.store, 4, 1);
  lint(m.g);
  CHECK(sorted(m.g));
  CHECK(report.sharded == 2);
  CHECK(report.whole == 0);
  CHECK(report.bytes_sharded == (8 + 5) * 4);
  CHECK(report.bytes_per_rank == (2 + 2) * 4);
  // The full weights are gone from the store and the graph; the shards are new weights.
  CHECK_FALSE(m.store.contains("fc.weight"));
  CHECK_FALSE(m.store.contains("fc.bias"));
  CHECK(m.store.created() == std::vector<std::string>{"fc_bias_shard", "fc_weight_shard"});
  for (const Node* n : m.g.nodes()) CHECK(n->op() != OpKind::get_attr);
  CHECK(count(m.g, c10d::all_gather_into_tensor) == 2);
  CHECK(count(m.g, c10d::wait_tensor) == 2);

  Node* w = placeholder(m.g, "fc_weight_shard");
  Node* b = placeholder(m.g, "fc_bias_shard");
  REQUIRE(w);
  REQUIRE(b);
  CHECK(w->meta.val.tensor()->shape == std::vector<Dim>{std::int64_t{2}});
  CHECK(b->meta.val.tensor()->shape == std::vector<Dim>{std::int64_t{2}});  // 5 padded to 8, over 4 ranks
  // [2, 4]: 8 elements, no padding, a reshape back; [5]: padded to 8, a slice back.
  CHECK(chain(w) == std::vector<std::string>{"_c10d_functional.all_gather_into_tensor.default",
                                             "_c10d_functional.wait_tensor.default", "aten.reshape.default"});
  CHECK(chain(b) == std::vector<std::string>{"_c10d_functional.all_gather_into_tensor.default",
                                             "_c10d_functional.wait_tensor.default", "aten.slice.Tensor"});
  Node* ag = *w->users().begin();
  CHECK(*ag->arg(1).get_if<std::int64_t>() == 4);
  CHECK(*ag->arg(2).get_if<std::string>() == "0");
  CHECK(ag->meta.val.tensor()->shape == std::vector<Dim>{std::int64_t{8}});
  // Each chain ends right before the weight's first use and feeds it.
  CHECK(m.first_use->prev()->is_call(aten::reshape));
  CHECK(m.first_use->arg(1).node() == m.first_use->prev());
  CHECK(m.first_use->prev()->meta.val.tensor()->shape == std::vector<Dim>{std::int64_t{2}, std::int64_t{4}});
  CHECK(m.second_use->prev()->is_call(aten::slice_Tensor));
  CHECK(m.second_use->arg(1).node() == m.second_use->prev());
  CHECK(*m.second_use->prev()->arg(3).get_if<std::int64_t>() == 5);
  // The shards' placeholders follow the graph's own.
  CHECK(*m.g.nodes().begin() == m.x);
  CHECK(m.x->next()->op() == OpKind::placeholder);
}

TEST_CASE("shard_parameters shards of ranks 0 to N-1 concatenate to the weight flattened and padded with zeros") {
  for (std::int64_t n = 1; n <= 5; ++n) {
    for (std::int64_t numel : {1, 6, 7, 12}) {
      CAPTURE(n);
      CAPTURE(numel);
      std::vector<float> gathered;
      std::vector<std::int64_t> gathered_ints;
      for (std::int64_t r = 0; r < n; ++r) {
        Graph g;
        io::WeightStore store;
        store.add("w", io::make_weight<float>({numel}, iota(numel)));
        const std::vector<float> values = iota(numel);
        store.add("i", io::make_weight<std::int64_t>({numel, 1}, std::vector<std::int64_t>(values.begin(), values.end())));
        Node* w = g.get_attr("w", meta({numel}));
        Node* i = g.get_attr("i", meta({numel, 1}, DType::int64));
        g.output(Arg(ArgList{Arg(w), Arg(i)}));
        shard(g, store, n, r);
        if (n == 1) {  // nothing to shard: the weights stay as they are
          CHECK(store.created().empty());
          CHECK(store.contains("w"));
          gathered = store.find("w")->values<float>();
          gathered_ints = store.find("i")->values<std::int64_t>();
          continue;
        }
        const auto ws = store.created_value("w_shard").values<float>();
        const auto is = store.created_value("i_shard").values<std::int64_t>();
        CHECK(static_cast<std::int64_t>(ws.size()) == (numel + n - 1) / n);
        gathered.insert(gathered.end(), ws.begin(), ws.end());
        gathered_ints.insert(gathered_ints.end(), is.begin(), is.end());
      }
      // The naive reference: the flat weight, then zeros up to a multiple of n.
      std::vector<float> want = iota(numel);
      while (static_cast<std::int64_t>(want.size()) % n) want.push_back(0);
      std::vector<std::int64_t> want_ints(want.begin(), want.end());
      CHECK(gathered == want);
      CHECK(gathered_ints == want_ints);
    }
  }
}

TEST_CASE("shard_parameters reads a weight's file in part: each rank's run of it, the same shards as from the held weight") {
  namespace fs = std::filesystem;
  const fs::path dir = test::scratch_dir("kiln_shard_files_");
  const std::vector<float> values = iota(7);  // 7 elements over 3 ranks: shards of 3, the last padded
  io::write_npy(dir / "w.npy", io::make_weight<float>({7}, values));
  std::vector<float> gathered;
  for (std::int64_t r = 0; r < 3; ++r) {
    io::GraphFile file;
    file.base_dir = dir;
    file.weights = {{"w", "w.npy"}};
    io::WeightStore store(file);
    Graph g;
    g.output(Arg(g.get_attr("w", meta({7}))));
    const sharding::ShardReport report = shard(g, store, 3, r);
    CHECK(report.sharded == 1);
    CHECK(report.bytes_sharded == 28);
    CHECK(report.bytes_per_rank == 12);
    const auto s = store.created_value("w_shard").values<float>();
    gathered.insert(gathered.end(), s.begin(), s.end());
  }
  std::vector<float> want = values;
  want.resize(9, 0.0f);
  CHECK(gathered == want);
  fs::remove_all(dir);
}

TEST_CASE("shard_parameters at world_size 1 leaves the graph and the weights alone, even without weights") {
  Model m;
  const std::size_t nodes = m.g.size();
  const Counters c = run_pass(m.g, nullptr, {{"world_size", 1}});
  CHECK(m.g.size() == nodes);
  CHECK(count(m.g, c10d::all_gather_into_tensor) == 0);
  CHECK(c.get("shard_parameters_sharded") == 0);
  Model k;
  CHECK(shard(k.g, k.store, 1, 0).sharded == 0);
  CHECK(k.store.contains("fc.weight"));
  CHECK(k.store.created().empty());
}

TEST_CASE("shard_parameters gathers a weight read twice once, before its first reader, for every reader") {
  Graph g;
  io::WeightStore store;
  store.add("emb", io::make_weight<float>({3, 3}, iota(9)));
  Node* x = g.placeholder("x", meta({3, 3}));
  Node* w1 = g.get_attr("emb", meta({3, 3}));
  Node* a = g.call_function(aten::mul_Tensor, {x, w1});
  a->meta.val = meta({3, 3});
  Node* b = g.call_function(aten::add_Tensor, {a, w1});
  b->meta.val = meta({3, 3});
  Node* w2 = g.get_attr("emb", meta({3, 3}));  // the same weight, a second node (tied weights)
  Node* c = g.call_function(aten::sub_Tensor, {b, w2});
  c->meta.val = meta({3, 3});
  g.output(Arg(ArgList{Arg(c)}));
  const auto report = shard(g, store, 2, 0);
  lint(g);
  CHECK(report.sharded == 1);
  CHECK(count(g, c10d::all_gather_into_tensor) == 1);
  CHECK(store.created() == std::vector<std::string>{"emb_shard"});
  Node* view = a->arg(1).node();
  CHECK(view->is_call(aten::reshape));
  CHECK(a->prev() == view);
  CHECK(b->arg(1).node() == view);
  CHECK(c->arg(1).node() == view);
  // 9 elements over 2 ranks: shards of 5, the gathered 10 sliced back to 9.
  CHECK(view->arg(0).node()->is_call(aten::slice_Tensor));
  CHECK(store.created_value("emb_shard").values<float>() == std::vector<float>{1, 2, 3, 4, 5});
}

TEST_CASE("shard_parameters leaves whole the weights under min_numel and those a call_module reads") {
  Model m;
  Node* mod = nullptr;
  {
    auto at = m.g.inserting_before(m.g.output_node());
    m.store.add("layer.weight", io::make_weight<float>({4}, iota(4)));
    Node* lw = m.g.get_attr("layer.weight", meta({4}));
    mod = m.g.call_module("layer", {m.second_use, lw});
    mod->meta.val = meta({2, 4});
  }
  m.g.output_node()->set_args({Arg(ArgList{Arg(mod)})});
  std::ostringstream log;
  const Counters c = run_pass(m.g, &m.store, {{"world_size", 2}, {"rank", 1}, {"min_numel", 6}}, &log);
  CHECK(c.get("shard_parameters_sharded") == 1);  // fc.weight, 8 elements
  CHECK(c.get("shard_parameters_whole") == 2);    // fc.bias (5 < 6), layer.weight (read by module "layer")
  CHECK(c.get("shard_parameters_bytes_sharded") == 32);
  CHECK(c.get("shard_parameters_bytes_per_rank") == 16);
  CHECK(m.store.contains("fc.bias"));
  CHECK(m.store.contains("layer.weight"));
  CHECK_FALSE(m.store.contains("fc.weight"));
  CHECK(m.store.created_value("fc_weight_shard").values<float>() == std::vector<float>{5, 6, 7, 8});
  CHECK(log.str() == "shard_parameters: 1 weights sharded over 2 ranks (rank 1 holds 16 of their 32 bytes), 2 left whole\n");
}

TEST_CASE("shard_parameters refuses a missing or bad option and a caller without weights, naming the option") {
  CHECK(error_of(nlohmann::json::object()).find("option world_size is missing") != std::string::npos);
  CHECK(error_of({{"world_size", 2}}).find("option rank is missing") != std::string::npos);
  CHECK(error_of({{"world_size", 0}, {"rank", 0}}).find("option world_size must be an integer >= 1, got 0") != std::string::npos);
  CHECK(error_of({{"world_size", "2"}, {"rank", 0}}).find("option world_size must be") != std::string::npos);
  CHECK(error_of({{"world_size", 2}, {"rank", 2}}).find("option rank must be an integer in [0, world_size 2), got 2") !=
        std::string::npos);
  CHECK(error_of({{"world_size", 2}, {"rank", -1}}).find("option rank must be") != std::string::npos);
  CHECK(error_of({{"world_size", 2}, {"rank", 0}, {"group_name", 3}}).find("option group_name must be a non-empty string") !=
        std::string::npos);
  CHECK(error_of({{"world_size", 2}, {"rank", 0}, {"min_numel", -1}}).find("option min_numel must be an integer >= 0") !=
        std::string::npos);
  CHECK(error_of({{"world_size", 2}, {"rank", 0}, {"ranks", 2}}).find("unknown key 'ranks'") != std::string::npos);
  CHECK(error_of({{"world_size", 2}, {"rank", 0}}, false).find("needs the graph's weights") != std::string::npos);
  CHECK(error_of({{"world_size", 2}, {"rank", 0}, {"group_name", "tp"}}).empty());
}

TEST_CASE("shard_parameters then bucket_fsdp_all_gather merges the shards' all-gathers, in its group, linted and sorted") {
  Model m;
  Counters c = run_pass(m.g, &m.store, {{"world_size", 2}, {"rank", 0}, {"group_name", "fsdp"}});
  CHECK(c.get("shard_parameters_sharded") == 2);
  for (const Node* n : m.g.nodes())
    if (n->is_call(c10d::all_gather_into_tensor)) CHECK(*n->arg(2).get_if<std::string>() == "fsdp");
  for (const auto& p : bucketing::bucketing_passes())
    if (p.name == "bucket_fsdp_all_gather") CHECK(bucketing::bucket_collectives(m.g, p, {}, &c) == 1);
  lint(m.g);
  CHECK(sorted(m.g));
  CHECK(c.get("bucket_fsdp_all_gather_collectives") == 2);
  CHECK(count(m.g, c10d::all_gather_into_tensor) == 1);
}

TEST_CASE("io::WeightStore::remove forgets a weight of the table, added or created") {
  io::GraphFile file;
  file.weights = {{"t", "t.npy"}, {"u", "u.npy"}};
  io::WeightStore store(file);
  store.add("a", io::make_weight<float>({1}, {1}));
  const std::string c = store.create("c", io::make_weight<float>({1}, {2}));
  CHECK(store.remove("t"));
  CHECK(store.remove("a"));
  CHECK(store.remove(c));
  CHECK_FALSE(store.remove("t"));
  CHECK_FALSE(store.remove("nothing"));
  CHECK(store.names() == std::vector<std::string>{"u"});
  CHECK(store.created().empty());
  CHECK(store.find("t") == nullptr);
}

#ifdef KILN_OPT_EXE
TEST_CASE("kiln-opt --passes shard_parameters writes one rank's graph: its shards beside it, no full weight in its table") {
  namespace fs = std::filesystem;
  const fs::path dir = test::scratch_dir("kiln_shard_");
  const fs::path src = fs::path(KILN_SOURCE_DIR) / "examples" / "small_cnn" / "graph.json";
  const std::string out = (dir / "rank1" / "graph.json").string();
  fs::create_directories(dir / "rank1");
  const test::ToolRun r = test::run_tool(
      KILN_OPT_EXE,
      "'" + src.string() + "' --passes shard_parameters --pass-options '{\"shard_parameters\": {\"world_size\": 4, \"rank\": 1}}'"
      " --counters -o '" + out + "'",
      dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("\"shard_parameters_sharded\":10") != std::string::npos);
  const io::GraphFile sharded = io::read_fx_json(out);
  const io::GraphFile original = io::read_fx_json(src);
  REQUIRE(sharded.weights.size() == original.weights.size());
  for (const auto& entry : sharded.weights) {
    CAPTURE(entry.first);
    CHECK(entry.first.ends_with("_shard"));
    CHECK(fs::exists(dir / "rank1" / entry.second));
  }
  // conv.weight's shard on rank 1: the second quarter of the flat weight (and its zero padding).
  const io::WeightTensor full = io::load_weight(original, "conv.weight");
  const io::WeightTensor shard = io::load_weight(sharded, "conv_weight_shard");
  const std::int64_t per = sharding::shard_numel(full.numel(), 4);
  CHECK(shard.shape == std::vector<std::int64_t>{per});
  const auto f = full.values<float>();
  const auto s = shard.values<float>();
  for (std::int64_t i = 0; i < per; ++i) {
    const std::int64_t at = per + i;
    CHECK(s[static_cast<std::size_t>(i)] == (at < full.numel() ? f[static_cast<std::size_t>(at)] : 0.0f));
  }
  // Without world_size, kiln-opt (unlike kiln-run) has none to give: an error naming the option.
  const test::ToolRun bad = test::run_tool(KILN_OPT_EXE, "'" + src.string() + "' --passes shard_parameters -o '" + out + "'", dir);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("option world_size is missing") != std::string::npos);
  fs::remove_all(dir);
}
#endif
