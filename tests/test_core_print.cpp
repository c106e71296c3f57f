// Text printing in torch.fx's format (Graph.__str__ / Node.format_node) and DOT output.
//
// torch.fx prints a call node as
//   %<name> : [num_users=<n>] = <op>[target=<target>](args = <tuple>, kwargs = <dict>)
// placeholders and get_attrs without the call part, and the output node as
// `return <args[0]>`, where a tuple prints with the one-element trailing comma.
// kiln writes targets by their canonical names (aten.mm.default) and, like
// torch.fx's _format_arg, other values with Python's str(), but strings as
// Python's repr (torch.fx prints them bare, so that '0' and 0 look the same).
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/ops/aten.hpp"

using namespace kiln;

namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream is(s);
  for (std::string line; std::getline(is, line);) out.push_back(line);
  return out;
}

std::size_t count(const std::string& s, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t pos = s.find(part); pos != std::string::npos; pos = s.find(part, pos + part.size())) ++n;
  return n;
}

TensorMeta tensor(std::vector<Dim> shape, DType dt = DType::float32) { return TensorMeta{std::move(shape), dt, std::nullopt}; }

}  // namespace

TEST_CASE("a small graph prints as torch.fx prints it") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.get_attr("w");
  Node* mm = g.call_function(aten::mm, {x, w});
  Node* relu = g.call_function(aten::relu, {mm});
  g.output(ArgList{relu});
  const std::string expected =
      "graph():\n"
      "    %x : [num_users=1] = placeholder[target=x]\n"
      "    %w : [num_users=1] = get_attr[target=w]\n"
      "    %mm : [num_users=1] = call_function[target=aten.mm.default](args = (%x, %w), kwargs = {})\n"
      "    %relu : [num_users=1] = call_function[target=aten.relu.default](args = (%mm,), kwargs = {})\n"
      "    return (relu,)\n";
  CHECK(to_string(g) == expected);
  std::ostringstream os;
  os << g;
  CHECK(os.str() == expected);
  std::ostringstream os2;
  print_graph(os2, g);
  CHECK(os2.str() == expected);
}

TEST_CASE("num_users counts distinct users, the output included") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* sq = g.call_function(aten::mul_Tensor, {x, x});
  Node* unused = g.call_function(aten::neg, {x});
  g.output(ArgList{sq, x});
  CHECK(format_node(*x) == "%x : [num_users=3] = placeholder[target=x]");
  CHECK(format_node(*sq) ==
        "%mul : [num_users=1] = call_function[target=aten.mul.Tensor](args = (%x, %x), kwargs = {})");
  CHECK(format_node(*unused) ==
        "%neg : [num_users=0] = call_function[target=aten.neg.default](args = (%x,), kwargs = {})");
}

TEST_CASE("placeholder target and node name may differ") {
  Graph g;
  Node* p = g.create_node(OpKind::placeholder, OpRegistry::instance().intern("L_x_"), {}, {}, "l_x_");
  CHECK(format_node(*p) == "%l_x_ : [num_users=0] = placeholder[target=L_x_]");
}

TEST_CASE("argument values print as torch.fx prints them, strings quoted") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* n = g.call_function(OpRef("mylib.f.default"),
                            {x, "x", Arg(), Arg(true), Arg(false), Arg(1.5), Arg(1e-05), Arg(-3),
                             Arg(DType::float32), Arg(DType::bool_), ArgList{1, ArgList{2, 3}}, ArgList{}},
                            {{"dim", Arg(1)}, {"name", Arg("a")}});
  CHECK(format_node(*n) ==
        "%f : [num_users=0] = call_function[target=mylib.f.default](args = (%x, 'x', None, True, False, 1.5, "
        "1e-05, -3, torch.float32, torch.bool, [1, [2, 3]], []), kwargs = {dim: 1, name: 'a'})");
}

TEST_CASE("floats print as Python's repr") {
  CHECK(format_arg(Arg(1.0)) == "1.0");
  CHECK(format_arg(Arg(0.1)) == "0.1");
  CHECK(format_arg(Arg(1e16)) == "1e+16");
  CHECK(format_arg(Arg(-0.0)) == "-0.0");
  CHECK(format_arg(Arg(2.5e-7)) == "2.5e-07");
  CHECK(format_arg(Arg(100.0)) == "100.0");
}

TEST_CASE("other argument forms") {
  Graph g;
  Node* x = g.placeholder("x");
  CHECK(format_arg(Arg(x)) == "%x");
  CHECK(format_arg(Arg(x), false) == "x");
  CHECK(format_arg(Arg(ArgList{x, ArgList{x}})) == "[%x, [%x]]");
  CHECK(format_arg(Arg(ArgList{x, ArgList{x}}), false) == "[x, [x]]");
  CHECK(format_arg(Arg(EnumConst{"torch.contiguous_format"})) == "torch.contiguous_format");
  CHECK(format_arg(Arg(Slice{{Arg(), Arg(4), Arg(2)}})) == "slice(None, 4, 2)");
  CHECK(format_arg(Arg(Slice{{Arg(x), Arg(SymInt{"s0"}), Arg()}})) == "slice(%x, s0, None)");
  CHECK(format_arg(Arg(SymInt{"s0"})) == "s0");
  CHECK(format_arg(Arg(ArgDict{{"a", Arg(1)}, {"b", Arg(ArgList{x})}})) == "{a: 1, b: [%x]}");
  CHECK(format_arg(Arg(ArgDict{})) == "{}");
  CHECK(format_arg(Arg(Repr{"<lambda>"})) == "<lambda>");
  CHECK(format_arg(Arg(std::int64_t{-9223372036854775807LL - 1})) == "-9223372036854775808");
  // torch.fx prints argument values with str(): devices bare. Strings as
  // Python's repr, so that '0' is not read as the integer 0.
  CHECK(format_arg(Arg("0")) == "'0'");
  CHECK(format_arg(Arg(ArgList{Arg("0"), Arg(0)})) == "['0', 0]");
  CHECK(format_arg(Arg("back\\slash")) == "'back\\\\slash'");
  CHECK(format_arg(Arg("it's")) == "\"it's\"");
  CHECK(format_arg(Arg("it's \"x\"")) == "'it\\'s \"x\"'");
  CHECK(format_arg(Arg("a\nb\tc\x01")) == "'a\\nb\\tc\\x01'");
  CHECK(format_arg(Arg("")) == "''");
  CHECK(format_arg(Arg(Device{"cuda:0"})) == "cuda:0");
  CHECK(format_arg(Arg(DType::bfloat16)) == "torch.bfloat16");
  CHECK(format_arg(Arg(DType::float8_e4m3fn)) == "torch.float8_e4m3fn");
}

TEST_CASE("call_method and call_module lines") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* v = g.call_method("view", {x, Arg(-1), Arg(4)});
  Node* m = g.call_module("encoder.layer", {v}, {{"mask", Arg()}});
  CHECK(format_node(*v) == "%view : [num_users=1] = call_method[target=view](args = (%x, -1, 4), kwargs = {})");
  CHECK(format_node(*m) ==
        "%encoder_layer : [num_users=0] = call_module[target=encoder.layer](args = (%view,), kwargs = {mask: None})");
}

TEST_CASE("a node without arguments prints an empty tuple") {
  Graph g;
  Node* z = g.call_function(aten::zeros, {});
  CHECK(format_node(*z) == "%zeros : [num_users=0] = call_function[target=aten.zeros.default](args = (), kwargs = {})");
}

TEST_CASE("the output line for different results") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* c = g.placeholder("c");
  {
    Graph h;
    Node* y = h.placeholder("y");
    CHECK(format_node(*h.output(Arg(y))) == "return y");
  }
  CHECK(format_node(*g.output(ArgList{a, b})) == "return (a, b)");
  CHECK(format_node(*g.output(ArgList{a})) == "return (a,)");
  CHECK(format_node(*g.output(ArgList{})) == "return ()");
  CHECK(format_node(*g.output(ArgList{a, ArgList{b, c}})) == "return (a, [b, c])");
  CHECK(format_node(*g.output(Arg())) == "return None");
}

TEST_CASE("show_meta appends a dtype-and-shape comment") {
  Graph g;
  Node* x = g.placeholder("x", MetaVal(tensor({std::int64_t{16}, std::int64_t{64}})));
  Node* s = g.placeholder("s", MetaVal(tensor({SymInt{"s0"}, std::int64_t{8}}, DType::bfloat16)));
  Node* i = g.placeholder("i", MetaVal(std::int64_t{5}));
  Node* r = g.call_function(aten::relu, {x});
  r->meta.val = MetaVal(tensor({std::int64_t{16}, std::int64_t{64}}));
  Node* split = g.call_function(aten::split_Tensor, {x, Arg(8)});
  split->meta.val = MetaVal(MetaVal::List{MetaVal(tensor({std::int64_t{8}}, DType::int64)), MetaVal(),
                                          MetaVal(SymInt{"s1"})});
  Node* one = g.call_function(aten::unbind_int, {x});
  one->meta.val = MetaVal(MetaVal::List{MetaVal(tensor({}, DType::bool_))});
  Node* none = g.call_function(aten::neg, {x});
  g.output(ArgList{r});

  PrintOptions meta{.show_meta = true};
  CHECK(format_node(*x, meta) == "%x : [num_users=4] = placeholder[target=x]  # f32[16, 64]");
  CHECK(format_node(*s, meta) == "%s : [num_users=0] = placeholder[target=s]  # bf16[s0, 8]");
  CHECK(format_node(*i, meta) == "%i : [num_users=0] = placeholder[target=i]  # 5");
  CHECK(format_node(*r, meta) ==
        "%relu : [num_users=1] = call_function[target=aten.relu.default](args = (%x,), kwargs = {})  # f32[16, 64]");
  CHECK(format_node(*split, meta).ends_with("  # (i64[8], None, s1)"));
  CHECK(format_node(*one, meta).ends_with("  # (b8[],)"));
  CHECK(format_node(*none, meta).find('#') == std::string::npos);  // no meta, no comment
  // Without the option there is no comment at all.
  CHECK(to_string(g).find('#') == std::string::npos);
  CHECK(count(to_string(g, meta), "  # ") == 6);
}

TEST_CASE("meta summaries use Inductor's dtype abbreviations") {
  const std::vector<std::pair<DType, const char*>> abbrs = {
      {DType::float32, "f32"}, {DType::float64, "f64"}, {DType::float16, "f16"},    {DType::bfloat16, "bf16"},
      {DType::int8, "i8"},     {DType::uint8, "u8"},    {DType::int16, "i16"},      {DType::int32, "i32"},
      {DType::int64, "i64"},   {DType::bool_, "b8"},    {DType::float8_e4m3fn, "f8e4m3fn"}, {DType::complex64, "c64"},
  };
  for (const auto& [dt, abbr] : abbrs) {
    CAPTURE(abbr);
    CHECK(format_meta_val(MetaVal(tensor({std::int64_t{2}}, dt))) == std::string(abbr) + "[2]");
  }
  CHECK(format_meta_val(MetaVal()) == "None");
}

TEST_CASE("to_dot has one node per graph node and one edge per input relation") {
  Graph g("net");
  Node* x = g.placeholder("x", MetaVal(tensor({std::int64_t{4}, std::int64_t{8}})));
  Node* w = g.get_attr("w");
  Node* mm = g.call_function(aten::mm, {x, w});
  Node* sq = g.call_function(aten::mul_Tensor, {mm, mm});  // one edge, not two
  Node* cat = g.call_function(aten::cat, {ArgList{x, sq, mm}}, {{"w", Arg(w)}});
  g.output(ArgList{cat, sq});
  std::string dot = to_dot(g);
  CHECK(dot.rfind("digraph \"net\" {\n", 0) == 0);
  CHECK(dot.ends_with("}\n"));
  std::size_t edges_expected = 0;
  for (Node* n : g.nodes()) edges_expected += n->all_input_nodes().size();
  CHECK(edges_expected == 9);  // mm:2 mul:1 cat:4 output:2
  CHECK(count(dot, " -> ") == edges_expected);
  CHECK(count(dot, "[label=") == g.size());
  for (Node* n : g.nodes()) {
    CAPTURE(n->name());
    CHECK(count(dot, "  \"" + n->name() + "\" [label=\"" + n->name() + "\\n") == 1);
    for (Node* in : n->all_input_nodes()) CHECK(count(dot, "  \"" + in->name() + "\" -> \"" + n->name() + "\";\n") == 1);
  }
  CHECK(dot.find("aten.mm.default") != std::string::npos);
  CHECK(dot.find("f32[4, 8]") != std::string::npos);
}

TEST_CASE("to_dot escapes quotes and backslashes") {
  Graph g("my \"graph\"");
  Node* w = g.get_attr("w\"q\\z");
  Node* m = g.call_method("say\"hi", {w});
  g.output(ArgList{m});
  std::string dot = to_dot(g);
  CHECK(dot.rfind("digraph \"my \\\"graph\\\"\" {", 0) == 0);
  CHECK(dot.find("w\\\"q\\\\z") != std::string::npos);
  CHECK(dot.find("say\\\"hi") != std::string::npos);
  // Every line has balanced unescaped quotes.
  for (const std::string& line : lines_of(dot)) {
    CAPTURE(line);
    std::size_t quotes = 0;
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\\') {
        ++i;
        continue;
      }
      if (line[i] == '"') ++quotes;
    }
    CHECK(quotes % 2 == 0);
  }
  CHECK(count(dot, " -> ") == 2);
}
