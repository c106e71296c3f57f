// einsum (kernels/einsum.hpp): the batched-matrix-product forms run on
// oneDNN's matmul, every other form on the loop; both checked against a
// reference loop over every letter written here, on contiguous and strided
// operands.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "kiln/executor/compiled_graph.hpp"
#include "kiln/kernels/onednn/common.hpp"
#include "runtime_test_support.hpp"

using namespace kiln;
using runtime::CompiledGraph;
using runtime::Tensor;
using test::meta;
using test::random_tensor;

namespace {

std::vector<std::string> split_operands(const std::string& lhs) {
  std::vector<std::string> out(1);
  for (char c : lhs) {
    if (c == ',') out.emplace_back();
    else out.back() += c;
  }
  return out;
}

// einsum of row-major tensors by an odometer over every letter; `eq` is explicit, letters only.
Tensor reference(const std::string& eq, const std::vector<Tensor>& ins) {
  const auto arrow = eq.find("->");
  const std::vector<std::string> subs = split_operands(eq.substr(0, arrow));
  const std::string out_subs = eq.substr(arrow + 2);
  std::map<char, std::int64_t> size;
  std::string letters = out_subs;
  for (std::size_t i = 0; i < subs.size(); ++i)
    for (std::size_t d = 0; d < subs[i].size(); ++d) {
      size[subs[i][d]] = std::max(size[subs[i][d]], ins[i].shape()[d]);  // a size-1 dim broadcasts
      if (letters.find(subs[i][d]) == std::string::npos) letters += subs[i][d];
    }
  runtime::Shape out_shape;
  for (char c : out_subs) out_shape.push_back(size[c]);
  Tensor out = Tensor::zeros(out_shape);
  std::map<char, std::int64_t> idx;
  for (char c : letters) idx[c] = 0;
  const auto flat = [&](const std::string& s, const runtime::Shape& shape) {
    std::int64_t f = 0;
    for (std::size_t d = 0; d < s.size(); ++d) f = f * shape[d] + (shape[d] == 1 ? 0 : idx[s[d]]);
    return f;
  };
  for (bool more = true; more;) {
    double product = 1;
    for (std::size_t i = 0; i < ins.size(); ++i) product *= ins[i].data<float>()[flat(subs[i], ins[i].shape())];
    out.data<float>()[flat(out_subs, out_shape)] += static_cast<float>(product);
    more = false;
    for (std::size_t k = letters.size(); k-- > 0;) {
      if (++idx[letters[k]] < size[letters[k]]) {
        more = true;
        break;
      }
      idx[letters[k]] = 0;
    }
  }
  return out;
}

bool has_primitive(const CompiledGraph& cg) {
  for (std::size_t i = 0; i < cg.num_steps(); ++i)
    if (dynamic_cast<const kernels::onednn::PrimitiveStep*>(&cg.step(i))) return true;
  return false;
}

// One einsum: operands made from placeholders of `shapes`, each permuted by
// `perms` first (empty: as it is); `ref_eq` is the same product written on the
// placeholders as they are.
struct Case {
  std::string eq;
  std::vector<runtime::Shape> shapes;
  std::vector<std::vector<std::int64_t>> perms;
  std::string ref_eq;
  const char* target = "torch.einsum";
};

struct Result {
  double rel = 0;
  bool on_matmul = false;
  runtime::Shape shape;
};

Result run_case(const Case& c, unsigned seed) {
  Graph g;
  std::vector<Tensor> inputs;
  ArgList operands;
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    std::vector<Dim> dims(c.shapes[i].begin(), c.shapes[i].end());
    Node* p = g.placeholder("x" + std::to_string(i), meta(dims));
    Node* operand = p;
    if (i < c.perms.size() && !c.perms[i].empty()) {
      ArgList perm(c.perms[i].begin(), c.perms[i].end());
      operand = g.call_function(aten::permute, {p, perm});
    }
    operands.push_back(operand);
    inputs.push_back(random_tensor(c.shapes[i], seed + static_cast<unsigned>(i)));
  }
  ArgList args{Arg(c.eq)};
  if (std::string(c.target) == "aten.einsum.default") args.push_back(operands);
  else args.insert(args.end(), operands.begin(), operands.end());
  g.output(ArgList{g.call_function(OpRef(c.target), std::move(args))});
  const auto cg = CompiledGraph::compile(g, {});
  const auto out = cg.run(std::span<const Tensor>(inputs));
  const Tensor want = reference(c.ref_eq, inputs);
  REQUIRE(out[0].shape() == want.shape());
  return {test::max_rel_diff(out[0], want), has_primitive(cg), out[0].shape()};
}

}  // namespace

TEST_CASE("einsum equations that are batched matrix products run on matmul, against a loop") {
  const std::vector<Case> cases{
      {"bhid,bhjd->bhij", {{2, 3, 4, 5}, {2, 3, 6, 5}}, {}, "bhid,bhjd->bhij"},
      {"bhij,bhjd->bhid", {{2, 3, 4, 6}, {2, 3, 6, 5}}, {}, "bhij,bhjd->bhid"},
      {"bij,bjk->bik", {{2, 5, 4}, {2, 5, 3}}, {{0, 2, 1}, {}}, "bji,bjk->bik"},  // a transposed view
      {"ij,jk->ik", {{3, 4}, {4, 5}}, {}, "ij,jk->ik"},
      {"...ij,...jk->...ik", {{2, 3, 4, 5}, {2, 3, 5, 6}}, {}, "XYij,XYjk->XYik"},
      {"...ij,...jk->...ik", {{4, 5}, {5, 6}}, {}, "ij,jk->ik"},
      {"bij,bjk->bik", {{2, 4, 5}, {2, 5, 3}}, {}, "bij,bjk->bik", "aten.einsum.default"},
      // MaxViT's attention, spaces and all, with k read through a permute that moves its batch dims.
      {"B G H I D, B G H J D -> B G H I J", {{2, 3, 2, 4, 5}, {3, 2, 2, 6, 5}}, {{}, {1, 0, 2, 3, 4}}, "BGHID,GBHJD->BGHIJ"},
      {"bni,bnio->bno", {{2, 3, 4}, {2, 3, 4, 5}}, {}, "bni,bnio->bno"},              // no free letter in a
      {"bij,bjk->kbi", {{2, 4, 5}, {2, 5, 3}}, {}, "bij,bjk->kbi"},                    // the output permuted
      {"abk,kc->bac", {{3, 4, 5}, {5, 2}}, {}, "abk,kc->bac"},                         // a copied: b, a do not merge as a view
      {"ijk,jkl->il", {{3, 4, 5}, {4, 5, 2}}, {}, "ijk,jkl->il"},                      // two contracted letters
      {"i,j->ij", {{3}, {4}}, {}, "i,j->ij"},                                          // nothing contracted
      {"bn,bn->b", {{3, 7}, {3, 7}}, {}, "bn,bn->b"},                                  // a batched dot
      {"jbi,bkj->bik", {{5, 2, 4}, {2, 3, 5}}, {}, "jbi,bkj->bik"},                    // batch dims not leading
      {"ij,jk->ijk", {{2, 3}, {3, 4}}, {}, "ij,jk->ijk"},                              // j a batch letter, nothing summed
  };
  unsigned seed = 100;
  for (const Case& c : cases) {
    CAPTURE(c.eq);
    CAPTURE(c.ref_eq);
    const Result r = run_case(c, seed += 10);
    CHECK(r.on_matmul);
    CHECK(r.rel < 1e-5);
  }
}

TEST_CASE("einsum forms that are not one product run on the loop, against a loop") {
  const std::vector<Case> cases{
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}, {}, "ij,jk,kl->il"},  // three operands
      {"ii->i", {{4, 4}}, {}, "ii->i"},                                  // a diagonal
      {"ij->j", {{3, 5}}, {}, "ij->j"},                                  // one operand summed
      {"bij,bjk->ik", {{2, 3, 4}, {2, 4, 5}}, {}, "bij,bjk->ik"},       // b summed in both: a contracted letter, on matmul
      {"ij,jk->i", {{2, 3}, {3, 4}}, {}, "ij,jk->i"},                   // k summed within one operand
      {"iij,jk->ik", {{3, 3, 4}, {4, 2}}, {}, "iij,jk->ik"},            // a repeated letter
  };
  unsigned seed = 300;
  for (const Case& c : cases) {
    CAPTURE(c.eq);
    const Result r = run_case(c, seed += 10);
    CHECK(r.on_matmul == (c.eq == "bij,bjk->ik"));
    CHECK(r.rel < 1e-5);
  }
}

TEST_CASE("einsum with an implicit output and with size-1 dims broadcasting, on matmul and on the loop, against a loop") {
  struct Form {
    Case c;
    bool on_matmul;
  };
  const std::vector<Form> forms{
      {{"ij,jk", {{3, 4}, {4, 5}}, {}, "ij,jk->ik"}, true},
      {{"ba,ca", {{3, 4}, {2, 4}}, {}, "ba,ca->bc"}, true},                     // letters once, in order
      {{"cb,Ab", {{3, 4}, {2, 4}}, {}, "cb,Ab->Ac"}, true},                     // upper case first
      {{"ii", {{4, 4}}, {}, "ii->"}, false},                                     // a trace: nothing left
      {{"...ij,...jk", {{2, 3, 4}, {2, 4, 5}}, {}, "Aij,Ajk->Aik"}, true},       // '...' leads
      {{"bij,bjk->bik", {{1, 3, 4}, {2, 4, 5}}, {}, "bij,bjk->bik"}, true},     // a batch dim broadcast
      {{"ij,jk->ik", {{3, 1}, {4, 5}}, {}, "ij,jk->ik"}, true},                 // a contracted dim broadcast
      {{"...ij,...jk->...ik", {{1, 2, 3, 4}, {3, 1, 4, 5}}, {}, "XYij,XYjk->XYik"}, true},
      {{"ij,j,ij->i", {{2, 3}, {1}, {2, 3}}, {}, "ij,j,ij->i"}, false},         // three operands, one broadcast
      {{"bi,bi", {{1, 4}, {3, 4}}, {}, "bi,bi->"}, true},                        // implicit and broadcast
  };
  unsigned seed = 500;
  for (const Form& f : forms) {
    CAPTURE(f.c.eq);
    const Result r = run_case(f.c, seed += 10);
    CHECK(r.on_matmul == f.on_matmul);
    CHECK(r.rel < 1e-5);
  }
}

TEST_CASE("einsum refuses what it cannot run, naming the node") {
  auto refused = [](const std::string& eq, std::vector<runtime::Shape> shapes) {
    Graph g;
    ArgList args{Arg(eq)};
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      std::vector<Dim> dims(shapes[i].begin(), shapes[i].end());
      args.push_back(g.placeholder("x" + std::to_string(i), meta(dims)));
    }
    g.output(ArgList{g.call_function(OpRef("torch.einsum"), std::move(args), {}, "bad")});
    try {
      (void)CompiledGraph::compile(g, {});
    } catch (const runtime::CompileError& e) {
      return std::string(e.what());
    }
    return std::string("compiled");
  };
  CHECK(refused("ij,jk->ik", {{2, 3}}) == "node bad (torch.einsum): equation 'ij,jk->ik' names 2 operands, the call has 1");
  CHECK(refused("...ij,...jk->ik", {{2, 2, 3}, {2, 3, 4}}) ==
        "node bad (torch.einsum): equation '...ij,...jk->ik': the operands have '...' dims and the output has no '...'");
  CHECK(refused("...ij,...jk->...ik", {{3, 2, 3}, {2, 3, 4}}) ==
        "node bad (torch.einsum): equation '...ij,...jk->...ik': letter 'A' has sizes 3 and 2, which do not broadcast");
  CHECK(refused("ij,jk", {{2, 3}, {2, 4}}) == "node bad (torch.einsum): equation 'ij,jk': letter 'j' has sizes 3 and 2, which do not broadcast");
  CHECK(refused("ijk,jk->ik", {{2, 3}, {3, 4}}) == "node bad (torch.einsum): operand 0 has rank 2, its subscripts 'ijk' say 3");
  CHECK(refused("i...j...,j->i", {{2, 3, 4}, {4}}) == "node bad (torch.einsum): equation 'i...j...,j->i': '...' twice in one operand");
  CHECK(refused("ij,jk->i...k...", {{2, 3}, {3, 4}}) ==
        "node bad (torch.einsum): equation 'ij,jk->i...k...': '...' twice in one subscript");
  CHECK(refused("ij,jk->iz", {{2, 3}, {3, 4}}) == "node bad (torch.einsum): output letter 'z' is in no operand");
}
