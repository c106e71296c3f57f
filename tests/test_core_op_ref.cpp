// OpRef identity (constexpr FNV-1a hash), the OpRegistry (interning, collisions,
// traits), the name heuristics infer_op_traits / op_short_name, and KILN_DECLARE_OP.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "test_support.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/ops/c10d_functional.hpp"
#include "kiln/ops/functional.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/ops/torch.hpp"

using namespace kiln;
using namespace kiln::testing;

// Ops declared by this test file, as a user of the library would declare them.
namespace test_ops {
KILN_DECLARE_OP(frob, "kiln_test.frob.default");
KILN_DECLARE_OP(frob_, "kiln_test.frob_.default");
KILN_DECLARE_OP_WITH(scribble, "kiln_test.scribble.default", (::kiln::OpTraits{.mutates = true}));
KILN_DECLARE_OP_WITH(announce, "kiln_test.announce.default", (::kiln::OpTraits{.side_effects = true}));
// Declaring the same op twice (e.g. from two headers) is not a collision.
KILN_DECLARE_OP(mm_again, "aten.mm.default");
}  // namespace test_ops


TEST_CASE("OpRef hashes and compares at compile time") {
  static_assert(OpRef("aten.mm.default") == aten::mm);
  static_assert(!(aten::mm == aten::bmm));
  static_assert(aten::mm.hash == hash_op_name("aten.mm.default"));
  static_assert(aten::mm.name == "aten.mm.default");
  static_assert(!(OpRef("aten.add.Tensor") == OpRef("aten.add.Scalar")));
  static_assert(OpRef().empty());
  static_assert(!aten::mm.empty());
  // FNV-1a 64 reference vectors.
  static_assert(hash_op_name("") == 0xcbf29ce484222325ull);
  static_assert(hash_op_name("a") == 0xaf63dc4c8601ec8cull);
  static_assert(hash_op_name("foobar") == 0x85944171f73967e8ull);
  CHECK(aten::mm == test_ops::mm_again);
  CHECK_FALSE(aten::mm == torch::mm);  // "torch.mm" is a different target from "aten.mm.default"
}

TEST_CASE("OpRef equality is by hash only") {
  constexpr OpRef fake("something.else", hash_op_name("aten.mm.default"));
  static_assert(fake == aten::mm);
  CHECK(fake.name != aten::mm.name);
}

TEST_CASE("OpRegistry::intern returns a stable view and the name's hash") {
  auto& reg = OpRegistry::instance();
  std::string name = "kiln_test.interned_op.default";
  OpRef a = reg.intern(name);
  CHECK(a.name == name);
  CHECK(a.hash == hash_op_name(name));
  CHECK(a.name.data() != name.data());  // the registry owns a copy
  name.assign(name.size(), 'x');          // clobbering the caller's string does not matter
  CHECK(a.name == "kiln_test.interned_op.default");

  // Interning many more names does not move earlier ones.
  const char* data_before = a.name.data();
  for (int i = 0; i < 5000; ++i) reg.intern("kiln_test.filler_" + std::to_string(i) + ".default");
  OpRef again = reg.intern("kiln_test.interned_op.default");
  CHECK(again.name.data() == data_before);
  CHECK(again == a);
  CHECK(a.name == "kiln_test.interned_op.default");
}

TEST_CASE("interning a declared op returns the declared name") {
  OpRef r = OpRegistry::instance().intern("aten.relu.default");
  CHECK(r == aten::relu);
  CHECK(r.name == "aten.relu.default");
}

TEST_CASE("OpRegistry::name_of maps a hash back to its name") {
  auto& reg = OpRegistry::instance();
  REQUIRE(reg.name_of(aten::mm.hash).has_value());
  CHECK(*reg.name_of(aten::mm.hash) == "aten.mm.default");
  CHECK(*reg.name_of(c10d_functional::all_reduce.hash) == "_c10d_functional.all_reduce.default");
  OpRef fresh = reg.intern("kiln_test.name_of_probe.default");
  CHECK(reg.name_of(fresh.hash) == std::optional<std::string_view>("kiln_test.name_of_probe.default"));
  CHECK_FALSE(reg.name_of(hash_op_name("kiln_test.never_interned.default")).has_value());
}

TEST_CASE("a hash collision is reported as OpHashCollision naming both ops") {
  auto& reg = OpRegistry::instance();
  const OpRef fake("fake.name", hash_op_name("aten.mm.default"));
  std::string msg = message_of<OpHashCollision>([&] { reg.declare(fake, {}); });
  CHECK(msg.find("fake.name") != std::string::npos);
  CHECK(msg.find("aten.mm.default") != std::string::npos);
  CHECK_THROWS_AS(reg.declare(fake, {}), OpHashCollision);
  CHECK_THROWS_AS(reg.declare(fake, {}), Error);  // OpHashCollision is a kiln::Error
  // The registry is unchanged by the failed declaration.
  CHECK(*reg.name_of(aten::mm.hash) == "aten.mm.default");
  CHECK(reg.intern("aten.mm.default").name == "aten.mm.default");
  CHECK_FALSE(reg.traits(aten::mm).impure());
}

TEST_CASE("re-declaring a name with its own hash is not a collision") {
  auto& reg = OpRegistry::instance();
  CHECK_NOTHROW(reg.declare(OpRef("aten.mm.default"), infer_op_traits("aten.mm.default")));
  CHECK(*reg.name_of(aten::mm.hash) == "aten.mm.default");
}

TEST_CASE("infer_op_traits: in-place and out= overloads mutate") {
  CHECK(infer_op_traits("aten.relu_.default").mutates);
  CHECK(infer_op_traits("aten.add_.Tensor").mutates);
  CHECK(infer_op_traits("aten.copy_.default").mutates);
  CHECK(infer_op_traits("aten.add.out").mutates);
  CHECK(infer_op_traits("aten.sum.IntList_out").mutates);
  CHECK(infer_op_traits("prims.copy_to.out").mutates);
  CHECK(infer_op_traits("aten.relu_.default").impure());
  CHECK_FALSE(infer_op_traits("aten.relu_.default").side_effects);
}

TEST_CASE("infer_op_traits: functional ops are pure") {
  for (const char* n : {"aten.add.Tensor", "aten.mm.default", "aten.relu.default", "aten.outer.default",
                        "aten._softmax.default", "aten.sum.dim_IntList", "quantized_decomposed.quantize_per_tensor.default",
                        "operator.getitem", "torch.nn.functional.linear", "torch.relu", "aten.layout.default"}) {
    CAPTURE(n);
    CHECK_FALSE(infer_op_traits(n).mutates);
    CHECK_FALSE(infer_op_traits(n).side_effects);
    CHECK_FALSE(infer_op_traits(n).impure());
  }
}

TEST_CASE("infer_op_traits: dunder ops are not in-place") {
  CHECK_FALSE(infer_op_traits("aten.__and__.Tensor").mutates);
  CHECK_FALSE(infer_op_traits("aten.__or__.Scalar").mutates);
  CHECK_FALSE(infer_op_traits("aten.__and__.Tensor").impure());
}

TEST_CASE("infer_op_traits: collectives and asserts have side effects") {
  for (const char* n : {"_c10d_functional.all_reduce.default", "_c10d_functional.wait_tensor.default",
                        "_c10d_functional.all_gather_into_tensor.default", "c10d.allreduce_.default",
                        "_c10d_functional_autograd.all_to_all_single.default", "aten._assert_async.msg",
                        "aten._assert_scalar.default", "aten.sym_constrain_range.default",
                        "aten.sym_constrain_range_for_size.default"}) {
    CAPTURE(n);
    CHECK(infer_op_traits(n).side_effects);
    CHECK(infer_op_traits(n).impure());
  }
  // A functional collective does not write its input.
  CHECK_FALSE(infer_op_traits("_c10d_functional.all_reduce.default").mutates);
}

TEST_CASE("infer_op_traits: torch.fx's other side-effectful functions") {
  // torch.fx.node._side_effectful_functions: graph DCE must keep these.
  for (const char* n : {"aten._assert_tensor_metadata.default", "operator.setitem", "torch._assert",
                        "torch._assert_async", "profiler._record_function_enter_new.default",
                        "profiler._record_function_exit._RecordFunction"}) {
    CAPTURE(n);
    CHECK(infer_op_traits(n).side_effects);
  }
}

TEST_CASE("infer_op_traits: in-place ops of other op namespaces mutate") {
  CHECK(infer_op_traits("mkldnn._convolution_pointwise_.binary").mutates);
  CHECK(infer_op_traits("inductor.accumulate_grad_.default").mutates);
  CHECK_FALSE(infer_op_traits("mkldnn._linear_pointwise.default").mutates);
}

TEST_CASE("registry traits: declared traits win over the name heuristics") {
  auto& reg = OpRegistry::instance();
  CHECK_FALSE(reg.traits(test_ops::frob).impure());
  CHECK(reg.traits(test_ops::frob_).mutates);  // KILN_DECLARE_OP infers from the name
  CHECK(reg.traits(test_ops::scribble).mutates);
  CHECK_FALSE(reg.traits(test_ops::scribble).side_effects);
  CHECK(reg.traits(test_ops::announce).side_effects);
  CHECK(reg.traits(aten::relu_).mutates);
  CHECK(reg.traits(c10d_functional::wait_tensor).side_effects);
  // An op never registered falls back to the name heuristics.
  CHECK(reg.traits(OpRef("kiln_test.never_seen_.default")).mutates);
}

TEST_CASE("set_traits changes what nodes report") {
  auto& reg = OpRegistry::instance();
  OpRef op = reg.intern("kiln_test.settable.default");
  Graph g;
  Node* x = g.placeholder("x");
  Node* n = g.call_function(op, {x});
  CHECK_FALSE(n->is_impure());
  reg.set_traits(op, OpTraits{.side_effects = true});
  CHECK(n->is_impure());
  CHECK_FALSE(n->is_mutating());
  reg.set_traits(op, OpTraits{.mutates = true});
  CHECK(n->is_mutating());
  reg.set_traits(op, OpTraits{});
  CHECK_FALSE(n->is_impure());
}

TEST_CASE("op_short_name strips namespace and overload") {
  static_assert(op_short_name("aten.add.Tensor") == "add");
  CHECK(op_short_name("aten.mm.default") == "mm");
  CHECK(op_short_name("aten._softmax.default") == "_softmax");
  CHECK(op_short_name("aten.add") == "add");  // packet without overload
  CHECK(op_short_name("prims.convert_element_type.default") == "convert_element_type");
  CHECK(op_short_name("quantized_decomposed.quantize_per_tensor.tensor") == "quantize_per_tensor");
  CHECK(op_short_name("onednn.qlinear_pointwise.binary") == "qlinear_pointwise");
  CHECK(op_short_name("_c10d_functional.all_reduce.default") == "all_reduce");
  CHECK(op_short_name("torch.nn.functional.linear") == "linear");
  CHECK(op_short_name("operator.getitem") == "getitem");
  CHECK(op_short_name("torch.cat") == "cat");
  CHECK(op_short_name("getattr") == "getattr");
}

TEST_CASE("op_short_name of other op namespaces seen in Inductor graphs") {
  CHECK(op_short_name("mkldnn._linear_pointwise.default") == "_linear_pointwise");
  CHECK(op_short_name("inductor.accumulate_grad_.default") == "accumulate_grad_");
  CHECK(op_short_name("profiler._record_function_enter_new.default") == "_record_function_enter_new");
}

TEST_CASE("Node::is_call is one compare of kind and target") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.placeholder("w");
  Node* mm = g.call_function(aten::mm, {x, w});
  Node* via_name = g.call_function(OpRef("aten.mm.default"), {x, w});
  Node* method = g.call_method("aten.mm.default", {x, w});
  CHECK(mm->is_call(aten::mm));
  CHECK(mm->is_call(test_ops::mm_again));
  CHECK_FALSE(mm->is_call(aten::bmm));
  CHECK_FALSE(mm->is_call(torch::mm));
  CHECK(via_name->is_call(aten::mm));
  CHECK_FALSE(method->is_call(aten::mm));  // not a call_function
  CHECK_FALSE(x->is_call(aten::mm));
  // The node's target view is the interned one.
  CHECK(mm->target_name() == "aten.mm.default");
  CHECK(mm->target() == aten::mm);
}

TEST_CASE("nodes of declared ops report the declared traits") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* s = g.call_function(test_ops::scribble, {x});
  Node* a = g.call_function(test_ops::announce, {x});
  Node* f = g.call_function(test_ops::frob, {x});
  CHECK(s->is_mutating());
  CHECK(s->is_impure());
  CHECK_FALSE(a->is_mutating());
  CHECK(a->is_impure());
  CHECK_FALSE(f->is_impure());
  CHECK(s->name() == "scribble");
}

TEST_CASE("Node::is_impure and is_mutating by node kind") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.get_attr("w");
  Node* m1 = g.call_method("add_", {x, w});
  Node* m2 = g.call_method("add", {x, w});
  Node* mod = g.call_module("layer", {x});
  Node* out = g.output(ArgList{m1, m2, mod});
  CHECK(x->is_impure());
  CHECK_FALSE(x->is_mutating());
  CHECK_FALSE(w->is_impure());
  CHECK(m1->is_impure());
  CHECK(m1->is_mutating());
  CHECK_FALSE(m2->is_impure());
  CHECK_FALSE(m2->is_mutating());
  CHECK(mod->is_impure());
  CHECK_FALSE(mod->is_mutating());
  CHECK(out->is_impure());
}
