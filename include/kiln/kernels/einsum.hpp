#pragma once
// torch.einsum(equation, *operands) on float32, for the graphs that carry one
// (einsum_to_pointwise_pass's numeric check among them): explicit output
// subscripts ("bni,bnio->bno"), letters only, no broadcasting. A naive loop
// over the output's letters and the summed ones, built for being right, not
// fast; a letter repeated within one operand reads its diagonal.
#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/kernel_group.hpp"

namespace kiln::kernels {

namespace einsum_detail {

struct EinsumPlan {
  std::vector<runtime::ValueId> ins;
  // Per operand, per letter: the stride that letter's index moves it by (0 where absent).
  std::vector<std::vector<std::int64_t>> strides;
  std::vector<std::int64_t> sizes;  // per letter: the output's letters first, then the summed ones
  std::size_t out_letters = 0;
  std::int64_t out_numel = 1, sum_numel = 1;
  runtime::ValueId out;
};

inline void run_einsum(const runtime::Frame& fr, const EinsumPlan& p) {
  std::vector<const float*> in;
  for (auto v : p.ins) in.push_back(fr.data_as<float>(v));
  float* out = fr.data_as<float>(p.out);
  const std::size_t letters = p.sizes.size();
  std::vector<std::int64_t> idx(letters);
  for (std::int64_t o = 0; o < p.out_numel; ++o) {
    for (std::size_t k = p.out_letters, rest = static_cast<std::size_t>(o); k-- > 0;) {
      idx[k] = static_cast<std::int64_t>(rest % static_cast<std::size_t>(p.sizes[k]));
      rest /= static_cast<std::size_t>(p.sizes[k]);
    }
    double acc = 0;
    for (std::int64_t s = 0; s < p.sum_numel; ++s) {
      for (std::size_t k = letters, rest = static_cast<std::size_t>(s); k-- > p.out_letters;) {
        idx[k] = static_cast<std::int64_t>(rest % static_cast<std::size_t>(p.sizes[k]));
        rest /= static_cast<std::size_t>(p.sizes[k]);
      }
      double product = 1;
      for (std::size_t i = 0; i < in.size(); ++i) {
        std::int64_t off = 0;
        for (std::size_t k = 0; k < letters; ++k) off += idx[k] * p.strides[i][k];
        product *= in[i][off];
      }
      acc += product;
    }
    out[o] = static_cast<float>(acc);
  }
}

struct Einsum {
  static void lower(runtime::LowerContext& ctx) {
    std::string eq;
    for (char c : ctx.string_arg(0, "equation"))
      if (c != ' ') eq += c;
    // Operands: the positional arguments after the equation, or one list of them.
    EinsumPlan p;
    const std::size_t nargs = ctx.node().args().size();
    if (nargs == 2 && ctx.node().args()[1].list()) p.ins = ctx.tensors(1, "operands");
    else
      for (std::size_t i = 1; i < nargs; ++i) p.ins.push_back(ctx.tensor(i, ""));
    const auto arrow = eq.find("->");
    if (arrow == std::string::npos) ctx.fail("equation '" + eq + "' has no '->' (implicit output is not supported)");
    std::vector<std::string> subs;
    for (std::size_t b = 0, e; b <= arrow; b = e + 1) {
      e = eq.find(',', b);
      if (e == std::string::npos || e > arrow) e = arrow;
      subs.push_back(eq.substr(b, e - b));
    }
    const std::string out_subs = eq.substr(arrow + 2);
    if (subs.size() != p.ins.size())
      ctx.fail("equation '" + eq + "' names " + std::to_string(subs.size()) + " operands, the call has " +
               std::to_string(p.ins.size()));
    // Letters: the output's in order, then the others as first seen.
    std::string letters;
    for (char c : out_subs) {
      if (!std::isalpha(static_cast<unsigned char>(c)) || letters.find(c) != std::string::npos)
        ctx.fail("equation '" + eq + "': output subscripts must be distinct letters");
      letters += c;
    }
    p.out_letters = letters.size();
    for (const std::string& s : subs)
      for (char c : s) {
        if (!std::isalpha(static_cast<unsigned char>(c))) ctx.fail("equation '" + eq + "': only letters are supported");
        if (letters.find(c) == std::string::npos) letters += c;
      }
    p.sizes.assign(letters.size(), -1);
    for (std::size_t i = 0; i < p.ins.size(); ++i) {
      const runtime::Layout& l = ctx.layout(p.ins[i]);
      if (l.dtype != DType::float32) ctx.fail("operand " + std::to_string(i) + " is not float32");
      if (l.rank() != subs[i].size())
        ctx.fail("operand " + std::to_string(i) + " has rank " + std::to_string(l.rank()) + ", its subscripts '" +
                 subs[i] + "' say " + std::to_string(subs[i].size()));
      std::vector<std::int64_t> strides(letters.size(), 0);
      for (std::size_t d = 0; d < subs[i].size(); ++d) {
        const std::size_t k = letters.find(subs[i][d]);
        if (p.sizes[k] >= 0 && p.sizes[k] != l.shape[d])
          ctx.fail(std::string("letter '") + subs[i][d] + "' has sizes " + std::to_string(p.sizes[k]) + " and " +
                   std::to_string(l.shape[d]) + " (broadcasting is not supported)");
        p.sizes[k] = l.shape[d];
        strides[k] += l.strides[d];
      }
      p.strides.push_back(std::move(strides));
    }
    runtime::Shape out_shape;
    for (std::size_t k = 0; k < letters.size(); ++k) {
      if (p.sizes[k] < 0) ctx.fail(std::string("output letter '") + letters[k] + "' is in no operand");
      if (k < p.out_letters) {
        out_shape.push_back(p.sizes[k]);
        p.out_numel *= p.sizes[k];
      } else {
        p.sum_numel *= p.sizes[k];
      }
    }
    p.out = ctx.buffer(out_shape, DType::float32);
    std::vector<runtime::ValueId> reads = p.ins;
    ctx.add_step(runtime::make_step([p](runtime::Frame& fr) { run_einsum(fr, p); }), std::move(reads), {p.out});
    ctx.set_result(p.out);
  }
};

}  // namespace einsum_detail

using einsum_kernels = KernelGroup<
    KernelEntry<"torch.functional.einsum", einsum_detail::Einsum>,
    KernelEntry<"torch.einsum", einsum_detail::Einsum>>;

}  // namespace kiln::kernels
