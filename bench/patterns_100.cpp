// Compile-cost benchmark: one translation unit with 100 distinct patterns of
// the size Inductor's pattern files use (depth 2-3, 3-5 pattern nodes each),
// each registered with a small handler in one PatternMatcherPass and applied to
// a tiny graph. The interesting figure is the compile, not the run:
//   /usr/bin/time -v g++ -std=c++20 -O2 -Iinclude -c bench/patterns_100.cpp -o /tmp/p100.o
// (the kiln-bench-patterns-100 target builds and links it the same way).
// The patterns were generated mechanically from 10 shapes x varied ops.
#include <cstdio>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"
#include "kiln/passes/pattern_matcher_pass.hpp"
#include "kiln/pattern.hpp"

using namespace kiln::pattern;
namespace aten = kiln::aten;

namespace {

// The tiny graph: relu(add(mm(x, w), b)) then a few unary/scalar ops, so that
// some of the patterns match and the count printed depends on all of them.
void build_graph(kiln::Graph& g) {
  kiln::Node* x = g.placeholder("x");
  kiln::Node* w = g.placeholder("w");
  kiln::Node* b = g.placeholder("b");
  kiln::Node* mm = g.call_function(aten::mm, {x, w});
  kiln::Node* add = g.call_function(aten::add_Tensor, {mm, b});
  kiln::Node* r = g.call_function(aten::relu, {add});
  kiln::Node* s = g.call_function(aten::sigmoid, {r});
  kiln::Node* m = g.call_function(aten::mul_Scalar, {s, 2.0});
  kiln::Node* t = g.call_function(aten::tanh, {m});
  kiln::Node* e = g.call_function(aten::exp, {t});
  kiln::Node* d = g.call_function(aten::div_Tensor, {e, x});
  g.output(kiln::ArgList{d});
}

}  // namespace

int main() {
  kiln::PatternMatcherPass pass("patterns_100");
  long hits = 0;
  // 0
  pass.register_pattern(CallFunction(aten::add_Tensor, CallFunction(aten::mm, kw<"a">, kw<"b">), kw<"c">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 1
  pass.register_pattern(CallFunction(aten::add_Tensor, CallFunction(aten::bmm, kw<"a">, kw<"b">), kw<"c">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 2
  pass.register_pattern(CallFunction(aten::sub_Tensor, CallFunction(aten::sigmoid, kw<"a">), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 3
  pass.register_pattern(CallFunction(aten::tanh, CallFunction(aten::mul_Tensor, kw<"a">, kw<"b">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 4
  pass.register_pattern(CallFunction(aten::gelu, CallFunction(aten::exp, kw<"a">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 5
  pass.register_pattern(CallFunction(aten::mm, kw<"a">, CallFunction(aten::silu, Arg())),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 6
  pass.register_pattern(CallFunction(aten::abs, CallFunction(aten::neg, CallFunction(aten::bmm, kw<"a">, Ignored()))),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 7
  pass.register_pattern(CallFunction(aten::maximum, CallFunction(aten::exp, CallFunction(aten::sqrt, kw<"a">)), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 8
  pass.register_pattern(CallFunction(aten::sub_Scalar, CallFunction(aten::log, kw<"a">), 0.5),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 9
  pass.register_pattern(CallFunction(aten::neg, CallFunction(aten::div_Scalar, kw<"a">, -1)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 10
  pass.register_pattern(CallFunction(aten::add_Tensor, CallFunction(aten::pow_Tensor_Scalar, kw<"a">, 3, MULTIPLE), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 11
  pass.register_pattern(CallFunction(aten::bmm, CallFunction(aten::pow_Tensor_Tensor, kw<"a">, kw<"b">), kw<"c">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 12
  pass.register_pattern(CallFunction(aten::maximum, CallFunction(aten::silu, kw<"a">), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 13
  pass.register_pattern(CallFunction(aten::abs, CallFunction(aten::minimum, kw<"a">, kw<"b">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 14
  pass.register_pattern(CallFunction(aten::exp, CallFunction(aten::reciprocal, kw<"a">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 15
  pass.register_pattern(CallFunction(aten::add_Tensor, kw<"a">, CallFunction(aten::log, Arg())),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 16
  pass.register_pattern(CallFunction(aten::neg, CallFunction(aten::sigmoid, CallFunction(aten::sub_Tensor, kw<"a">, Ignored()))),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 17
  pass.register_pattern(CallFunction(aten::mul_Tensor, CallFunction(aten::sqrt, CallFunction(aten::tanh, kw<"a">)), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 18
  pass.register_pattern(CallFunction(aten::div_Scalar, CallFunction(aten::rsqrt, kw<"a">), 1),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 19
  pass.register_pattern(CallFunction(aten::reciprocal, CallFunction(aten::pow_Tensor_Scalar, kw<"a">, 2.0)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 20
  pass.register_pattern(CallFunction(aten::bmm, CallFunction(aten::add_Scalar, kw<"a">, 0.5, MULTIPLE), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 21
  pass.register_pattern(CallFunction(aten::sub_Tensor, CallFunction(aten::mul_Tensor, kw<"a">, kw<"b">), kw<"c">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 22
  pass.register_pattern(CallFunction(aten::mul_Tensor, CallFunction(aten::log, kw<"a">), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 23
  pass.register_pattern(CallFunction(aten::neg, CallFunction(aten::div_Tensor, kw<"a">, kw<"b">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 24
  pass.register_pattern(CallFunction(aten::sqrt, CallFunction(aten::silu, kw<"a">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 25
  pass.register_pattern(CallFunction(aten::bmm, kw<"a">, CallFunction(aten::rsqrt, Arg())),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 26
  pass.register_pattern(CallFunction(aten::reciprocal, CallFunction(aten::exp, CallFunction(aten::maximum, kw<"a">, Ignored()))),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 27
  pass.register_pattern(CallFunction(aten::minimum, CallFunction(aten::relu, CallFunction(aten::log, kw<"a">)), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 28
  pass.register_pattern(CallFunction(aten::pow_Tensor_Scalar, CallFunction(aten::sigmoid, kw<"a">), -1),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 29
  pass.register_pattern(CallFunction(aten::tanh, CallFunction(aten::add_Scalar, kw<"a">, 3)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 30
  pass.register_pattern(CallFunction(aten::sub_Tensor, CallFunction(aten::mul_Scalar, kw<"a">, 1, MULTIPLE), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 31
  pass.register_pattern(CallFunction(aten::maximum, CallFunction(aten::bmm, kw<"a">, kw<"b">), kw<"c">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 32
  pass.register_pattern(CallFunction(aten::minimum, CallFunction(aten::rsqrt, kw<"a">), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 33
  pass.register_pattern(CallFunction(aten::reciprocal, CallFunction(aten::pow_Tensor_Tensor, kw<"a">, kw<"b">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 34
  pass.register_pattern(CallFunction(aten::relu, CallFunction(aten::sqrt, kw<"a">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 35
  pass.register_pattern(CallFunction(aten::sub_Tensor, kw<"a">, CallFunction(aten::sigmoid, Arg())),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 36
  pass.register_pattern(CallFunction(aten::tanh, CallFunction(aten::reciprocal, CallFunction(aten::mul_Tensor, kw<"a">, Ignored()))),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 37
  pass.register_pattern(CallFunction(aten::div_Tensor, CallFunction(aten::gelu, CallFunction(aten::relu, kw<"a">)), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 38
  pass.register_pattern(CallFunction(aten::add_Scalar, CallFunction(aten::silu, kw<"a">), 2.0),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 39
  pass.register_pattern(CallFunction(aten::abs, CallFunction(aten::mul_Scalar, kw<"a">, 0.5)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 40
  pass.register_pattern(CallFunction(aten::maximum, CallFunction(aten::sub_Scalar, kw<"a">, -1, MULTIPLE), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 41
  pass.register_pattern(CallFunction(aten::mul_Tensor, CallFunction(aten::pow_Tensor_Tensor, kw<"a">, kw<"b">), kw<"c">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 42
  pass.register_pattern(CallFunction(aten::div_Tensor, CallFunction(aten::sigmoid, kw<"a">), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 43
  pass.register_pattern(CallFunction(aten::tanh, CallFunction(aten::mm, kw<"a">, kw<"b">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 44
  pass.register_pattern(CallFunction(aten::gelu, CallFunction(aten::tanh, kw<"a">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 45
  pass.register_pattern(CallFunction(aten::maximum, kw<"a">, CallFunction(aten::silu, Arg())),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 46
  pass.register_pattern(CallFunction(aten::abs, CallFunction(aten::silu, CallFunction(aten::minimum, kw<"a">, Ignored()))),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 47
  pass.register_pattern(CallFunction(aten::pow_Tensor_Tensor, CallFunction(aten::exp, CallFunction(aten::abs, kw<"a">)), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 48
  pass.register_pattern(CallFunction(aten::mul_Scalar, CallFunction(aten::log, kw<"a">), 3),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 49
  pass.register_pattern(CallFunction(aten::neg, CallFunction(aten::sub_Scalar, kw<"a">, 1)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 50
  pass.register_pattern(CallFunction(aten::mul_Tensor, CallFunction(aten::div_Scalar, kw<"a">, 2.0, MULTIPLE), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 51
  pass.register_pattern(CallFunction(aten::minimum, CallFunction(aten::mul_Tensor, kw<"a">, kw<"b">), kw<"c">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 52
  pass.register_pattern(CallFunction(aten::pow_Tensor_Tensor, CallFunction(aten::silu, kw<"a">), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 53
  pass.register_pattern(CallFunction(aten::abs, CallFunction(aten::add_Tensor, kw<"a">, kw<"b">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 54
  pass.register_pattern(CallFunction(aten::exp, CallFunction(aten::log, kw<"a">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 55
  pass.register_pattern(CallFunction(aten::mul_Tensor, kw<"a">, CallFunction(aten::log, Arg())),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 56
  pass.register_pattern(CallFunction(aten::neg, CallFunction(aten::sqrt, CallFunction(aten::div_Tensor, kw<"a">, Ignored()))),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 57
  pass.register_pattern(CallFunction(aten::mm, CallFunction(aten::sqrt, CallFunction(aten::rsqrt, kw<"a">)), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 58
  pass.register_pattern(CallFunction(aten::sub_Scalar, CallFunction(aten::rsqrt, kw<"a">), 0.5),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 59
  pass.register_pattern(CallFunction(aten::reciprocal, CallFunction(aten::div_Scalar, kw<"a">, -1)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 60
  pass.register_pattern(CallFunction(aten::minimum, CallFunction(aten::pow_Tensor_Scalar, kw<"a">, 3, MULTIPLE), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 61
  pass.register_pattern(CallFunction(aten::div_Tensor, CallFunction(aten::bmm, kw<"a">, kw<"b">), kw<"c">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 62
  pass.register_pattern(CallFunction(aten::mm, CallFunction(aten::log, kw<"a">), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 63
  pass.register_pattern(CallFunction(aten::neg, CallFunction(aten::bmm, kw<"a">, kw<"b">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 64
  pass.register_pattern(CallFunction(aten::sqrt, CallFunction(aten::relu, kw<"a">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 65
  pass.register_pattern(CallFunction(aten::minimum, kw<"a">, CallFunction(aten::rsqrt, Arg())),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 66
  pass.register_pattern(CallFunction(aten::reciprocal, CallFunction(aten::tanh, CallFunction(aten::pow_Tensor_Tensor, kw<"a">, Ignored()))),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 67
  pass.register_pattern(CallFunction(aten::add_Tensor, CallFunction(aten::relu, CallFunction(aten::gelu, kw<"a">)), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 68
  pass.register_pattern(CallFunction(aten::div_Scalar, CallFunction(aten::sigmoid, kw<"a">), 1),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 69
  pass.register_pattern(CallFunction(aten::tanh, CallFunction(aten::pow_Tensor_Scalar, kw<"a">, 2.0)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 70
  pass.register_pattern(CallFunction(aten::div_Tensor, CallFunction(aten::add_Scalar, kw<"a">, 0.5, MULTIPLE), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 71
  pass.register_pattern(CallFunction(aten::pow_Tensor_Tensor, CallFunction(aten::pow_Tensor_Tensor, kw<"a">, kw<"b">), kw<"c">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 72
  pass.register_pattern(CallFunction(aten::add_Tensor, CallFunction(aten::rsqrt, kw<"a">), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 73
  pass.register_pattern(CallFunction(aten::reciprocal, CallFunction(aten::sub_Tensor, kw<"a">, kw<"b">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 74
  pass.register_pattern(CallFunction(aten::relu, CallFunction(aten::abs, kw<"a">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 75
  pass.register_pattern(CallFunction(aten::div_Tensor, kw<"a">, CallFunction(aten::sigmoid, Arg())),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 76
  pass.register_pattern(CallFunction(aten::tanh, CallFunction(aten::log, CallFunction(aten::mm, kw<"a">, Ignored()))),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 77
  pass.register_pattern(CallFunction(aten::bmm, CallFunction(aten::gelu, CallFunction(aten::neg, kw<"a">)), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 78
  pass.register_pattern(CallFunction(aten::pow_Tensor_Scalar, CallFunction(aten::silu, kw<"a">), -1),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 79
  pass.register_pattern(CallFunction(aten::abs, CallFunction(aten::add_Scalar, kw<"a">, 3)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 80
  pass.register_pattern(CallFunction(aten::pow_Tensor_Tensor, CallFunction(aten::mul_Scalar, kw<"a">, 1, MULTIPLE), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 81
  pass.register_pattern(CallFunction(aten::mm, CallFunction(aten::mul_Tensor, kw<"a">, kw<"b">), kw<"c">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 82
  pass.register_pattern(CallFunction(aten::bmm, CallFunction(aten::sigmoid, kw<"a">), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 83
  pass.register_pattern(CallFunction(aten::tanh, CallFunction(aten::maximum, kw<"a">, kw<"b">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 84
  pass.register_pattern(CallFunction(aten::gelu, CallFunction(aten::rsqrt, kw<"a">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 85
  pass.register_pattern(CallFunction(aten::pow_Tensor_Tensor, kw<"a">, CallFunction(aten::silu, Arg())),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 86
  pass.register_pattern(CallFunction(aten::abs, CallFunction(aten::relu, CallFunction(aten::add_Tensor, kw<"a">, Ignored()))),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 87
  pass.register_pattern(CallFunction(aten::sub_Tensor, CallFunction(aten::exp, CallFunction(aten::sigmoid, kw<"a">)), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 88
  pass.register_pattern(CallFunction(aten::add_Scalar, CallFunction(aten::log, kw<"a">), 2.0),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 89
  pass.register_pattern(CallFunction(aten::neg, CallFunction(aten::mul_Scalar, kw<"a">, 0.5)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 90
  pass.register_pattern(CallFunction(aten::mm, CallFunction(aten::sub_Scalar, kw<"a">, -1, MULTIPLE), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 91
  pass.register_pattern(CallFunction(aten::sub_Tensor, CallFunction(aten::silu, kw<"a">), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 92
  pass.register_pattern(CallFunction(aten::abs, CallFunction(aten::mul_Tensor, kw<"a">, kw<"b">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 93
  pass.register_pattern(CallFunction(aten::exp, CallFunction(aten::gelu, kw<"a">)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 94
  pass.register_pattern(CallFunction(aten::mm, kw<"a">, CallFunction(aten::log, Arg())),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 95
  pass.register_pattern(CallFunction(aten::neg, CallFunction(aten::abs, CallFunction(aten::bmm, kw<"a">, Ignored()))),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 96
  pass.register_pattern(CallFunction(aten::maximum, CallFunction(aten::sqrt, CallFunction(aten::exp, kw<"a">)), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 97
  pass.register_pattern(CallFunction(aten::mul_Scalar, CallFunction(aten::rsqrt, kw<"a">), 3),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 98
  pass.register_pattern(CallFunction(aten::reciprocal, CallFunction(aten::sub_Scalar, kw<"a">, 1)),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });
  // 99
  pass.register_pattern(CallFunction(aten::add_Tensor, CallFunction(aten::div_Scalar, kw<"a">, 2.0, MULTIPLE), kw<"b">),
                        [&hits](auto& m, kiln::Graph&, kiln::Node*) { hits += 1 + (m.template get<"a">().is_node() ? 1 : 0); });

  kiln::Graph g;
  build_graph(g);
  kiln::Counters counters;
  const std::size_t applied = pass.apply(g, &counters);
  std::printf("patterns=%zu applied=%zu hits=%ld matched_nodes=%lld\n", pass.num_patterns(), applied, hits,
              static_cast<long long>(counters.get("pattern_matcher_nodes")));
  return applied > 0 ? 0 : 1;
}
