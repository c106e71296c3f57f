#pragma once
// RuntimePattern: a pattern built while the program runs (from a traced example
// graph, a file, user input) instead of spelled as a type. It is a DAG of
// elements, each created before the elements that use it:
//
//   RuntimePattern p;
//   auto a = p.keyword_arg("a"), b = p.keyword_arg("b"), c = p.keyword_arg("c");
//   auto mm = p.call_function(aten::mm, {a, b});
//   p.set_output(p.call_function(aten::add_Tensor, {mm, c}));
//
// The elements are Inductor's: call elements (CallFunction, CallMethod,
// CallModule: targets, users count or MULTIPLE, positional children, keyword
// children in order), KeywordArg, ExclusiveKeywordArg, Ignored, Arg, constants
// and literal lists. An element used by two parents is one Inductor pattern
// object used twice: both places must match one node. Several outputs make an
// Inductor MultiOutputPattern. Matching lives in runtime_matcher.hpp; this
// header only holds and prints the DAG, and const access is safe from several
// threads.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/arg.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/op_kind.hpp"
#include "kiln/core/print.hpp"
#include "kiln/pattern/call.hpp"  // OpSet, Users, MULTIPLE

namespace kiln::pattern {

enum class ElementKind : std::uint8_t { call, keyword_arg, exclusive_arg, ignored, arg, constant, list };

class RuntimePattern {
 public:
  // A handle to an element of this pattern (its index).
  struct Ref {
    std::uint32_t id = 0;
    friend bool operator==(Ref, Ref) = default;
  };
  using KeywordChildren = std::vector<std::pair<std::string, Ref>>;

  struct Element {
    ElementKind kind{};
    // call
    OpKind op = OpKind::call_function;
    OpSet fns;
    Users users{1};
    std::vector<Ref> args;  // a call's positional children, or a list's items
    KeywordChildren kwargs;
    // keyword_arg / exclusive_arg
    std::string name;
    // constant
    kiln::Arg value;
  };

  // ---- building ----

  Ref keyword_arg(std::string name) { return add_named(ElementKind::keyword_arg, std::move(name)); }
  Ref exclusive_keyword_arg(std::string name) { return add_named(ElementKind::exclusive_arg, std::move(name)); }
  Ref ignored() { return add(blank(ElementKind::ignored)); }
  Ref arg() { return add(blank(ElementKind::arg)); }
  // A constant child: equal (Python ==) to the argument, which must not be a node.
  Ref constant(kiln::Arg value) {
    if (holds_node(value)) throw Error("RuntimePattern::constant: a constant cannot hold a node reference");
    Element e = blank(ElementKind::constant);
    e.value = std::move(value);
    return add(std::move(e));
  }
  // A literal list: the argument must be a list of exactly this length, matched item by item.
  Ref list(std::vector<Ref> items) {
    check_refs(items, "list");
    Element e = blank(ElementKind::list);
    e.args = std::move(items);
    return add(std::move(e));
  }
  Ref call(OpKind op, OpSet fns, std::vector<Ref> args, KeywordChildren kwargs = {}, Users users = {}) {
    if (op != OpKind::call_function && op != OpKind::call_method && op != OpKind::call_module)
      throw Error("RuntimePattern::call: a call element is call_function, call_method or call_module, not " +
                  std::string(op_kind_name(op)));
    if (fns.size() == 0) throw Error("RuntimePattern::call: a call element needs at least one target");
    check_refs(args, "call");
    for (std::size_t i = 0; i < kwargs.size(); ++i) {
      check_refs({kwargs[i].second}, "call");
      for (std::size_t k = 0; k < i; ++k)
        if (kwargs[k].first == kwargs[i].first)
          throw Error("RuntimePattern::call: keyword child '" + kwargs[i].first + "' given twice");
    }
    Element e = blank(ElementKind::call);
    e.op = op;
    e.fns = std::move(fns);
    e.users = users;
    e.args = std::move(args);
    e.kwargs = std::move(kwargs);
    return add(std::move(e));
  }
  Ref call_function(OpSet fns, std::vector<Ref> args, KeywordChildren kwargs = {}, Users users = {}) {
    return call(OpKind::call_function, std::move(fns), std::move(args), std::move(kwargs), users);
  }
  Ref call_method(OpSet methods, std::vector<Ref> args, KeywordChildren kwargs = {}, Users users = {}) {
    return call(OpKind::call_method, std::move(methods), std::move(args), std::move(kwargs), users);
  }
  Ref call_module(OpSet modules, std::vector<Ref> args, KeywordChildren kwargs = {}, Users users = {}) {
    return call(OpKind::call_module, std::move(modules), std::move(args), std::move(kwargs), users);
  }

  // The pattern's output: one call element, matched at the node the pattern is tried at.
  void set_output(Ref out) { set_outputs({out}); }
  // Several outputs (Inductor's MultiOutputPattern): the first, a call element,
  // is matched at the node; the others are found from it. std::nullopt stands
  // for Inductor's None (an output not looked for).
  void set_outputs(std::vector<std::optional<Ref>> outs) {
    if (outs.empty()) throw Error("RuntimePattern::set_outputs: no outputs given");
    if (!outs[0]) throw Error("RuntimePattern::set_outputs: the first output cannot be None");
    for (const auto& o : outs)
      if (o) check_refs({*o}, "set_outputs");
    if (elements_[outs[0]->id].kind != ElementKind::call)
      throw Error("RuntimePattern::set_outputs: the first output must be a call element, not " +
                  describe_element(*outs[0]));
    outputs_ = std::move(outs);
  }

  // ---- reading ----

  const std::vector<Element>& elements() const { return elements_; }
  const Element& operator[](Ref r) const { return elements_.at(r.id); }
  const std::vector<std::optional<Ref>>& outputs() const { return outputs_; }
  bool empty() const { return outputs_.empty(); }
  // The element the pattern is tried at: the first output.
  Ref root() const {
    if (outputs_.empty()) throw Error("RuntimePattern: no output set (set_output / set_outputs)");
    return *outputs_[0];
  }

  // What a pass indexes the pattern under (Inductor's op and fns): the root's kind and targets.
  OpKind root_kind() const { return elements_[root().id].op; }
  const OpSet& root_fns() const { return elements_[root().id].fns; }

  // Inductor's repr: CallFunction(aten.add.Tensor, CallFunction(aten.mm.default,
  // KeywordArg('a'), KeywordArg('b')), KeywordArg('c')), or
  // MultiOutputPattern([...]) for several outputs.
  std::string describe() const {
    if (outputs_.empty()) return "<RuntimePattern without output>";
    if (outputs_.size() == 1) return describe_element(*outputs_[0]);
    std::string s = "MultiOutputPattern([";
    for (std::size_t i = 0; i < outputs_.size(); ++i)
      s += (i ? ", " : "") + (outputs_[i] ? describe_element(*outputs_[i]) : std::string("None"));
    return s + "])";
  }
  std::string describe_element(Ref r) const {
    std::string s;
    describe_into(s, r);
    return s;
  }

 private:
  static Element blank(ElementKind kind) {
    Element e;
    e.kind = kind;
    return e;
  }
  Ref add(Element e) {
    elements_.push_back(std::move(e));
    return Ref{static_cast<std::uint32_t>(elements_.size() - 1)};
  }
  Ref add_named(ElementKind kind, std::string name) {
    if (name.empty()) throw Error("RuntimePattern: a KeywordArg needs a name");
    Element e = blank(kind);
    e.name = std::move(name);
    return add(std::move(e));
  }
  // Children exist before their parents, which keeps the elements a DAG.
  void check_refs(const std::vector<Ref>& refs, const char* what) const {
    for (Ref r : refs)
      if (r.id >= elements_.size())
        throw Error(std::string("RuntimePattern::") + what + ": element " + std::to_string(r.id) +
                    " does not exist (this pattern has " + std::to_string(elements_.size()) + ")");
  }
  void describe_into(std::string& s, Ref r) const {
    const Element& e = elements_[r.id];
    switch (e.kind) {
      case ElementKind::keyword_arg: s += "KeywordArg('" + e.name + "')"; return;
      case ElementKind::exclusive_arg: s += "ExclusiveKeywordArg('" + e.name + "')"; return;
      case ElementKind::ignored: s += "Ignored()"; return;
      case ElementKind::arg: s += "Arg()"; return;
      case ElementKind::constant:
        s += format_arg(e.value);
        return;
      case ElementKind::list:
        s += "[";
        for (std::size_t i = 0; i < e.args.size(); ++i) {
          if (i) s += ", ";
          describe_into(s, e.args[i]);
        }
        s += "]";
        return;
      case ElementKind::call:
        s += e.op == OpKind::call_function ? "CallFunction(" : e.op == OpKind::call_method ? "CallMethod(" : "CallModule(";
        s += e.fns.describe();
        for (Ref c : e.args) {
          s += ", ";
          describe_into(s, c);
        }
        for (const auto& [k, c] : e.kwargs) {
          s += ", " + k + "=";
          describe_into(s, c);
        }
        if (e.users.count < 0) s += ", _users=MULTIPLE";
        else if (e.users.count != 1) s += ", _users=" + std::to_string(e.users.count);
        s += ")";
        return;
    }
  }

  std::vector<Element> elements_;
  std::vector<std::optional<Ref>> outputs_;
};

}  // namespace kiln::pattern
