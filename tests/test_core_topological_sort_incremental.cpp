// stable_topological_sort(g, late): told which nodes may come before an input,
// it must leave exactly the order the full sort leaves, return the same count
// and throw the same error, while looking only at the nodes around those.
// Checked on random DAGs made unsorted the way rewrites do it (nodes created
// before their inputs, nodes given inputs that lie after them, nodes moved),
// each built twice from one seed, one copy sorted by each form; and against
// a plain transcription of Inductor's algorithm where the graphs are small.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "inductor_sort_reference.hpp"
#include "test_support.hpp"

using namespace kiln;
using namespace kiln::testing;

namespace {

struct Shape {
  int nodes = 30;     // of the DAG before the edits
  int max_fan_in = 3;
  int edits = 3;
};

// A random DAG (plain, listed, keyword and repeated arguments) edited into an
// unsorted graph; `late` gets what each edit may have left before an input.
// Edges always run from a lower rank to a higher one, so no edit makes a
// cycle, while list positions are chosen freely.
class RandomGraph {
 public:
  RandomGraph(Graph& g, std::uint32_t seed, Shape shape) : g_(g), rng_(seed) {
    const int placeholders = 1 + pick(3);
    for (int i = 0; i < placeholders; ++i) add_rank(g_.placeholder("p" + std::to_string(i)), i - placeholders);
    for (int i = 0; i < shape.nodes; ++i) {
      std::vector<Node*> inputs;
      const int fan_in = 1 + pick(shape.max_fan_in);
      for (int k = 0; k < fan_in; ++k) inputs.push_back(below(static_cast<double>(i)));
      add_rank(make(inputs), i);
    }
    ArgList outs;
    for (Node* n : live_) if (n->num_users() == 0) outs.push_back(Arg(n));
    output_ = g_.output(Arg(std::move(outs)));
    for (int e = 0; e < shape.edits; ++e) edit();
  }
  std::vector<Node*> late;

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<std::uint32_t>(n)); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * (static_cast<double>(rng_()) / 4294967296.0); }
  void add_rank(Node* n, double r) {
    rank_[n] = r;
    live_.push_back(n);
  }
  // A random live node of rank below `r` (a placeholder at worst).
  Node* below(double r) {
    std::vector<Node*> c;
    for (Node* n : live_) if (rank_[n] < r) c.push_back(n);
    return c[static_cast<std::size_t>(pick(static_cast<int>(c.size())))];
  }
  // A node using `inputs`: in plain arguments, a nested list (sometimes
  // repeating one), keyword arguments or a list under a keyword, with scalars between.
  Node* make(const std::vector<Node*>& inputs) {
    ArgList args;
    ArgDict kwargs;
    std::size_t i = 0;
    while (i < inputs.size()) {
      const int form = pick(5);
      if (form == 0 || form == 1) {
        args.push_back(Arg(inputs[i++]));
      } else if (form == 2) {
        ArgList list;
        const std::size_t take = 1 + static_cast<std::size_t>(pick(3));
        for (std::size_t k = 0; k < take && i < inputs.size(); ++k) list.push_back(Arg(inputs[i++]));
        if (pick(2) == 0) list.push_back(list.front());  // a repeated input
        list.push_back(Arg(1.5));
        args.push_back(Arg(std::move(list)));
      } else if (form == 3) {
        kwargs.set("k" + std::to_string(i), Arg(inputs[i]));
        ++i;
      } else {
        ArgList list{Arg(inputs[i++])};
        if (i < inputs.size()) list.push_back(Arg(inputs[i++]));
        kwargs.set("l" + std::to_string(i), Arg(std::move(list)));
      }
    }
    if (pick(3) == 0) args.push_back(args.empty() ? Arg(inputs.front()) : args.back());  // repeated again
    return g_.call_function(aten::add_Tensor, std::move(args), std::move(kwargs));
  }
  // Any node but the output (nothing goes after it).
  Node* random_anchor() {
    std::vector<Node*> list = g_.node_list();
    return list[static_cast<std::size_t>(pick(static_cast<int>(list.size()) - 1))];
  }
  std::vector<Node*> computed() const {
    std::vector<Node*> c;
    for (Node* n : live_) if (n->op() != OpKind::placeholder) c.push_back(n);
    return c;
  }
  // Adds `n`, and its users that lie before it, to `late`.
  void late_with_users(Node* n) {
    late.push_back(n);
    for (Node* u : n->users()) if (u->is_before(*n)) late.push_back(u);
  }
  void edit() {
    const double top = static_cast<double>(live_.size());
    switch (pick(4)) {
      case 0: {  // a new node created anywhere, used by some nodes of higher rank
        const double r = uniform(0, top);
        std::vector<Node*> inputs;
        const int fan_in = 1 + pick(4);
        for (int k = 0; k < fan_in; ++k) inputs.push_back(below(r));
        Node* n;
        {
          auto guard = g_.inserting_before(random_anchor());
          n = make(inputs);
        }
        add_rank(n, r);
        std::vector<Node*> users;
        for (Node* m : computed()) if (rank_[m] > r && pick(4) == 0) users.push_back(m);
        for (Node* u : users) {
          ArgList args = u->args().to_list();
          args.push_back(Arg(n));
          u->set_args(std::move(args));
        }
        late_with_users(n);
        break;
      }
      case 1: {  // a node replaced by a new one made somewhere else, as a fusion does
        std::vector<Node*> c = computed();
        Node* old = c[static_cast<std::size_t>(pick(static_cast<int>(c.size())))];
        double hi = top + 1;
        for (Node* u : old->users()) if (u != output_) hi = std::min(hi, rank_[u]);
        const double r = uniform(rank_[old], hi);
        std::vector<Node*> inputs;
        for (Node* in : old->all_input_nodes()) inputs.push_back(in);
        if (pick(2) == 0) inputs.push_back(below(rank_[old]));  // (not `old`, whose uses it takes)
        Node* n;
        {
          auto guard = pick(2) == 0 ? g_.inserting_after(random_anchor()) : g_.inserting_before(random_anchor());
          n = make(inputs);
        }
        add_rank(n, r);
        old->replace_all_uses_with(n);
        if (pick(2) == 0) {
          g_.erase_node(old);
          live_.erase(std::find(live_.begin(), live_.end(), old));
          late.erase(std::remove(late.begin(), late.end(), old), late.end());
        }
        late_with_users(n);
        break;
      }
      case 2: {  // an existing node given an input of lower rank, wherever it lies
        std::vector<Node*> c = computed();
        Node* n = c[static_cast<std::size_t>(pick(static_cast<int>(c.size())))];
        Node* in = below(rank_[n]);
        if (pick(2) == 0) {
          ArgList args = n->args().to_list();
          args.push_back(Arg(in));
          n->set_args(std::move(args));
        } else {
          ArgDict kwargs = n->kwargs();
          kwargs.set("extra" + std::to_string(pick(1000)), Arg(ArgList{Arg(in), Arg(in)}));
          n->set_kwargs(std::move(kwargs));
        }
        late.push_back(n);
        break;
      }
      default: {  // a node moved (sometimes to the front)
        std::vector<Node*> c = computed();
        Node* n = c[static_cast<std::size_t>(pick(static_cast<int>(c.size())))];
        g_.move_before(pick(5) == 0 ? g_.front() : random_anchor(), n);
        late_with_users(n);
        break;
      }
    }
    if (pick(4) == 0 && !late.empty()) late.push_back(late.front());  // duplicates are allowed
    if (pick(4) == 0) late.push_back(computed().front());             // so are nodes that are in place
  }

  Graph& g_;
  std::mt19937 rng_;
  std::unordered_map<Node*, double> rank_;
  std::vector<Node*> live_;
  Node* output_ = nullptr;
};

// Sorts one copy fully and another with `late`; both must agree.
void check_seed(std::uint32_t seed, Shape shape, bool against_inductor, int& disordered) {
  Graph full, incremental, relinked;
  [[maybe_unused]] RandomGraph built_full(full, seed, shape);
  RandomGraph built(incremental, seed, shape);
  RandomGraph built_relinked(relinked, seed, shape);
  REQUIRE(names(full) == names(incremental));
  const std::vector<std::string> inductor = against_inductor ? names(inductor_sort_order(full)) : std::vector<std::string>{};
  const std::size_t moved = stable_topological_sort(full);
  disordered += moved > 0;
  CHECK(stable_topological_sort(incremental, built.late) == moved);
  CHECK(names(incremental) == names(full));
  // Counting only what it relinks changes the count, never the order.
  const std::size_t relinks = stable_topological_sort(relinked, built_relinked.late, SortMoveCount::relinked);
  CHECK((relinks == 0) == (moved == 0));
  CHECK(names(relinked) == names(full));
  if (against_inductor) CHECK(names(full) == inductor);
  check_links(incremental);
  check_links(relinked);
  CHECK_NOTHROW(lint(incremental));
  // Sorted now: nothing late is out of place, and nothing moves.
  const std::vector<Node*> sorted = incremental.node_list();
  CHECK(stable_topological_sort(incremental, built.late) == 0);
  CHECK(incremental.node_list() == sorted);
}

}  // namespace

TEST_CASE("incremental sort: small random graphs sort as the full sort and as Inductor") {
  int disordered = 0, seeds = 0;
  for (std::uint32_t seed = 1; seed <= 400; ++seed, ++seeds) {
    CAPTURE(seed);
    check_seed(seed, Shape{5 + static_cast<int>(seed % 30), 1 + static_cast<int>(seed % 4), 1 + static_cast<int>(seed % 5)}, true,
               disordered);
  }
  CHECK(disordered > seeds / 2);  // most seeds left something to sort
}

TEST_CASE("incremental sort: larger random graphs with many edits and wide fan-in") {
  int disordered = 0, seeds = 0;
  for (std::uint32_t seed = 1000; seed < 1200; ++seed, ++seeds) {
    CAPTURE(seed);
    check_seed(seed, Shape{100 + static_cast<int>(seed % 300), 1 + static_cast<int>(seed % 12), 2 + static_cast<int>(seed % 25)},
               seed % 10 == 0, disordered);
  }
  CHECK(disordered > seeds / 2);
}

TEST_CASE("incremental sort: a sorted graph with nothing late moves nothing") {
  Graph g;
  RandomGraph built(g, 42, Shape{200, 4, 0});
  REQUIRE(stable_topological_sort(g) == 0);  // (no edit: sorted as built)
  std::vector<Node*> before = g.node_list();
  std::vector<std::uint64_t> keys;
  for (Node* n : before) keys.push_back(n->order_key());
  CHECK(stable_topological_sort(g, {}) == 0);
  CHECK(g.node_list() == before);
  // Nodes named late that are in place move nothing either.
  std::vector<Node*> late(before.begin() + 10, before.begin() + 60);
  CHECK(stable_topological_sort(g, late) == 0);
  CHECK(g.node_list() == before);
  for (std::size_t i = 0; i < before.size(); ++i) CHECK(before[i]->order_key() == keys[i]);
}

// Each hand-made graph is built twice (clone() needs a sorted graph): one
// copy is sorted fully, for the count and order the other must match.
TEST_CASE("incremental sort: a chain of waiters follows the node the first one waits on") {
  // x; u1 = neg(a); u2 = neg(u1); u3 = neg(u2); s = exp(x); a = relu(x), listed
  // x, u1, u2, u3, s, a, output. Only u1 comes before its input: u1 waits on a,
  // u2 on u1, u3 on u2; s is placed in front of them (moved, 1); a is placed
  // in front of them too (2); then u1, u2, u3 follow a, each where it already
  // is after the previous one.
  struct Built {
    Graph g;
    Node *x, *a, *u1, *u2, *u3, *s;
    Built() {
      x = g.placeholder("x");
      a = g.call_function(aten::relu, {x});
      u1 = g.call_function(aten::neg, {a});
      u2 = g.call_function(aten::neg, {u1});
      u3 = g.call_function(aten::neg, {u2});
      s = g.call_function(aten::exp, {x});
      g.output(ArgList{u3, s});
      g.move_before(g.output_node(), a);
    }
  } full, inc;
  REQUIRE(names(inc.g) == std::vector<std::string>{"x", "neg", "neg_1", "neg_2", "exp", "relu", "output"});
  const std::size_t expect = stable_topological_sort(full.g);
  CHECK(expect == 2);
  const std::vector<Node*> late{inc.u1};
  CHECK(stable_topological_sort(inc.g, late) == expect);
  CHECK(inc.g.node_list() == std::vector<Node*>{inc.x, inc.s, inc.a, inc.u1, inc.u2, inc.u3, inc.g.output_node()});
  CHECK(names(inc.g) == names(full.g));
  check_links(inc.g);
}

TEST_CASE("incremental sort: a node waiting on a node that itself waits") {
  // x; b = neg(c); c = exp(d); d = relu(x); listed x, b, c, d, output.
  // b waits on c, c on d; d is placed after x (moved, 1: b is the first
  // unplaced node); c follows d (moved, 2: b is still first), and b then
  // already follows c.
  struct Built {
    Graph g;
    Node *x, *b, *c, *d, *out;
    Built() {
      x = g.placeholder("x");
      d = g.call_function(aten::relu, {x});
      c = g.call_function(aten::exp, {d});
      b = g.call_function(aten::neg, {c});
      out = g.output(ArgList{b});
      g.move_before(d, b);
      g.move_before(d, c);
    }
  } full, inc;
  REQUIRE(inc.g.node_list() == std::vector<Node*>{inc.x, inc.b, inc.c, inc.d, inc.out});
  const std::size_t expect = stable_topological_sort(full.g);
  CHECK(expect == 2);
  const std::vector<Node*> late{inc.b, inc.c};
  CHECK(stable_topological_sort(inc.g, late) == expect);
  CHECK(inc.g.node_list() == std::vector<Node*>{inc.x, inc.d, inc.c, inc.b, inc.out});
  check_links(inc.g);
}

TEST_CASE("incremental sort: with the graph's first node late, the first node placed stays") {
  // u = add(a, x) listed first: x, then a = relu(x). u waits on a; x, the
  // first node placed, stays where it is (behind u); a is placed after x
  // where it is (u lies before x, so it is not the node after the cursor);
  // u is moved after a (1).
  struct Built {
    Graph g;
    Node *x, *a, *u, *out;
    Built() {
      x = g.placeholder("x");
      a = g.call_function(aten::relu, {x});
      u = g.call_function(aten::add_Tensor, {a, x});
      out = g.output(ArgList{u});
      g.move_before(x, u);
    }
  } full, inc;
  REQUIRE(inc.g.node_list() == std::vector<Node*>{inc.u, inc.x, inc.a, inc.out});
  const std::size_t expect = stable_topological_sort(full.g);
  CHECK(expect == 1);
  const std::vector<Node*> late{inc.u};
  CHECK(stable_topological_sort(inc.g, late) == expect);
  CHECK(inc.g.node_list() == std::vector<Node*>{inc.x, inc.a, inc.u, inc.out});
  check_links(inc.g);
}

TEST_CASE("incremental sort: a cycle throws the full sort's error and moves nothing") {
  // x; a = relu(x); b = neg(a); c = exp(b); s = sigmoid(c); then a is given c
  // as an input: a <- c <- b <- a.
  struct Built {
    Graph g;
    Node* a;
    Built() {
      Node* x = g.placeholder("x");
      a = g.call_function(aten::relu, {x});
      Node* b = g.call_function(aten::neg, {a});
      Node* c = g.call_function(aten::exp, {b});
      Node* s = g.call_function(aten::sigmoid, {c});
      g.output(ArgList{s});
      a->set_args({x, c});
    }
  } full, inc;
  const std::vector<std::string> before = names(inc.g);
  const std::vector<Node*> order = inc.g.node_list();
  const std::string expect = message_of<GraphError>([&] { stable_topological_sort(full.g); });
  CHECK(expect.find("cycle") != std::string::npos);
  CHECK(expect.find("relu") != std::string::npos);
  CHECK(names(full.g) == before);  // the full sort moved nothing either
  const std::vector<Node*> late{inc.a};
  CHECK(message_of<GraphError>([&] { stable_topological_sort(inc.g, late); }) == expect);
  CHECK(inc.g.node_list() == order);
  check_links(inc.g);
}

TEST_CASE("incremental sort: random cycles throw as the full sort does, moving nothing") {
  int cycles = 0;
  for (std::uint32_t seed = 1; seed <= 100; ++seed) {
    CAPTURE(seed);
    Graph full, inc;
    [[maybe_unused]] RandomGraph built_full(full, seed, Shape{20 + static_cast<int>(seed % 40), 3, 0});
    [[maybe_unused]] RandomGraph built_inc(inc, seed, Shape{20 + static_cast<int>(seed % 40), 3, 0});
    // A node given one of its descendants as an input, the same in both.
    std::mt19937 rng(seed);
    const std::vector<Node*> lf = full.node_list(), li = inc.node_list();
    std::size_t n = 0, descendant = 0;
    for (int tries = 0; tries < 50 && !descendant; ++tries) {
      n = rng() % lf.size();
      Node* d = lf[n];
      for (int steps = 1 + static_cast<int>(rng() % 4); steps > 0; --steps) {
        std::vector<Node*> users;
        for (Node* u : d->users()) if (u->op() != OpKind::output) users.push_back(u);
        if (users.empty()) break;
        d = users[rng() % users.size()];
      }
      if (d != lf[n] && lf[n]->op() != OpKind::placeholder)
        descendant = static_cast<std::size_t>(std::find(lf.begin(), lf.end(), d) - lf.begin());
    }
    if (!descendant) continue;
    for (const auto* list : {&lf, &li}) {
      Node* m = (*list)[n];
      ArgList args = m->args().to_list();
      args.push_back(Arg((*list)[descendant]));
      m->set_args(std::move(args));
    }
    ++cycles;
    const std::string expect = message_of<GraphError>([&] { stable_topological_sort(full); });
    CHECK(expect.find("cycle") != std::string::npos);
    CHECK(full.node_list() == lf);
    const std::vector<Node*> late{li[n]};
    CHECK(message_of<GraphError>([&] { stable_topological_sort(inc, late); }) == expect);
    CHECK(inc.node_list() == li);
  }
  CHECK(cycles > 50);
}
