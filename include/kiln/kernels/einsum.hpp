#pragma once
// torch.einsum(equation, *operands) and aten.einsum on float32: output
// subscripts explicit ("bni,bnio->bno") or implicit (no '->': the letters that
// appear once, in ASCII order, after '...'), letters and '...'; a dim of size 1
// broadcasts against the other operands' size of its letter. Two operands whose letters are each
// batch (both operands and the output), contracted (both operands only) or
// free (one operand and the output) are a batched matrix product: each operand
// is viewed (or copied) as [batch..., M, K] and [batch..., K, N], oneDNN's
// matmul runs (onednn/matmul.hpp, through aten.matmul), and the result is
// viewed in the output's letter order. Anything else is a naive loop over the
// output's letters and the summed ones, built for being right, not fast; a
// letter repeated within one operand reads its diagonal.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/kernels/kernel.hpp"
#include "kiln/kernels/kernel_group.hpp"
#include "kiln/kernels/shape/views.hpp"

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

// An equation with its output explicit and every '...' spelled out as letters of its own.
struct Equation {
  std::string text;  // as written, for messages
  std::vector<std::string> inputs;
  std::string output;
};

// Replaces the '...' of `subs` (at most one) by the last `n` of `fresh`; `rank`
// is the operand's (nullopt for the output, which takes all of `fresh`).
inline std::string spell_ellipsis(const runtime::LowerContext& ctx, const std::string& eq, const std::string& subs,
                                  const std::string& fresh, std::optional<std::size_t> rank) {
  const auto at = subs.find("...");
  if (at == std::string::npos) return subs;
  if (subs.find("...", at + 3) != std::string::npos) ctx.fail("equation '" + eq + "': '...' twice in one subscript");
  const std::size_t n = rank ? *rank - (subs.size() - 3) : fresh.size();
  return subs.substr(0, at) + fresh.substr(fresh.size() - n) + subs.substr(at + 3);
}

// The output torch gives an equation without '->': '...' if any operand has
// it, then the letters that appear once in the whole equation, in ASCII order
// (upper case first).
inline std::string implicit_output(const std::string& lhs) {
  std::string out = lhs.find("...") != std::string::npos ? "..." : "";
  for (char c = 'A'; c <= 'z'; ++c)
    if (std::isalpha(static_cast<unsigned char>(c)) && std::count(lhs.begin(), lhs.end(), c) == 1) out += c;
  return out;
}

inline Equation parse_equation(const runtime::LowerContext& ctx, const std::string& eq, const std::vector<std::size_t>& ranks) {
  auto arrow = eq.find("->");
  const bool implicit = arrow == std::string::npos;
  if (implicit) arrow = eq.size();
  Equation e{eq, {}, implicit ? implicit_output(eq) : eq.substr(arrow + 2)};
  for (std::size_t b = 0, end; b <= arrow; b = end + 1) {
    end = eq.find(',', b);
    if (end == std::string::npos || end > arrow) end = arrow;
    e.inputs.push_back(eq.substr(b, end - b));
  }
  if (e.inputs.size() != ranks.size())
    ctx.fail("equation '" + eq + "' names " + std::to_string(e.inputs.size()) + " operands, the call has " +
             std::to_string(ranks.size()));
  // The dims '...' stands for in each operand; the output's are the most of them.
  std::size_t most = 0;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::string& s = e.inputs[i];
    const auto at = s.find("...");
    if (at == std::string::npos) continue;
    if (s.find("...", at + 3) != std::string::npos) ctx.fail("equation '" + eq + "': '...' twice in one operand");
    if (ranks[i] + 3 < s.size())
      ctx.fail("operand " + std::to_string(i) + " has rank " + std::to_string(ranks[i]) + ", fewer than the letters of '" + s + "'");
    most = std::max(most, ranks[i] + 3 - s.size());
  }
  if (most > 0 && e.output.find("...") == std::string::npos)
    ctx.fail("equation '" + eq + "': the operands have '...' dims and the output has no '...'");
  std::string fresh;
  for (char c : std::string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"))
    if (fresh.size() < most && eq.find(c) == std::string::npos) fresh += c;
  if (fresh.size() < most) ctx.fail("equation '" + eq + "': too many '...' dims");
  for (std::size_t i = 0; i < ranks.size(); ++i) e.inputs[i] = spell_ellipsis(ctx, eq, e.inputs[i], fresh, ranks[i]);
  e.output = spell_ellipsis(ctx, eq, e.output, fresh, std::nullopt);
  return e;
}

inline void lower_naive(runtime::LowerContext& ctx, const Equation& e, std::vector<runtime::ValueId> ins) {
  const std::string& eq = e.text;
  EinsumPlan p;
  p.ins = std::move(ins);
  // Letters: the output's in order, then the others as first seen.
  std::string letters;
  for (char c : e.output) {
    if (!std::isalpha(static_cast<unsigned char>(c)) || letters.find(c) != std::string::npos)
      ctx.fail("equation '" + eq + "': output subscripts must be distinct letters");
    letters += c;
  }
  p.out_letters = letters.size();
  for (const std::string& s : e.inputs)
    for (char c : s) {
      if (!std::isalpha(static_cast<unsigned char>(c))) ctx.fail("equation '" + eq + "': only letters and '...' are supported");
      if (letters.find(c) == std::string::npos) letters += c;
    }
  p.sizes.assign(letters.size(), -1);
  for (std::size_t i = 0; i < p.ins.size(); ++i) {
    const runtime::Layout& l = ctx.layout(p.ins[i]);
    if (l.dtype != DType::float32) ctx.fail("operand " + std::to_string(i) + " is not float32");
    if (l.rank() != e.inputs[i].size())
      ctx.fail("operand " + std::to_string(i) + " has rank " + std::to_string(l.rank()) + ", its subscripts '" +
               e.inputs[i] + "' say " + std::to_string(e.inputs[i].size()));
    std::vector<std::int64_t> strides(letters.size(), 0);
    for (std::size_t d = 0; d < e.inputs[i].size(); ++d) {
      const std::size_t k = letters.find(e.inputs[i][d]);
      if (p.sizes[k] >= 0 && p.sizes[k] != l.shape[d])
        ctx.fail(std::string("letter '") + e.inputs[i][d] + "' has sizes " + std::to_string(p.sizes[k]) + " and " +
                 std::to_string(l.shape[d]) + " within one operand");
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

// The letters of a two-operand equation by role, each group in the output's
// order (contracted ones in the first operand's), when it is a batched matrix product.
struct ProductForm {
  std::string batch, free_a, free_b, contracted;
};

inline bool distinct_letters(const std::string& s) {
  for (std::size_t i = 0; i < s.size(); ++i)
    if (!std::isalpha(static_cast<unsigned char>(s[i])) || s.find(s[i], i + 1) != std::string::npos) return false;
  return true;
}

inline std::optional<ProductForm> product_form(const Equation& e) {
  if (e.inputs.size() != 2) return std::nullopt;
  const std::string &a = e.inputs[0], &b = e.inputs[1], &out = e.output;
  if (!distinct_letters(a) || !distinct_letters(b) || !distinct_letters(out)) return std::nullopt;
  const auto in = [](const std::string& s, char c) { return s.find(c) != std::string::npos; };
  ProductForm f;
  for (char c : out) {
    if (in(a, c) && in(b, c)) f.batch += c;
    else if (in(a, c)) f.free_a += c;
    else if (in(b, c)) f.free_b += c;
    else return std::nullopt;  // an output letter in no operand: the loop names it
  }
  for (char c : a)
    if (!in(out, c)) {
      if (!in(b, c)) return std::nullopt;  // summed within one operand
      f.contracted += c;
    }
  for (char c : b)
    if (!in(out, c) && !in(a, c)) return std::nullopt;
  return f;
}

// `v` (subscripts `subs`) with its dims as [batch..., rows, cols]: each group of
// letters merged into one dim, a view where the strides allow, else a copy.
inline runtime::ValueId as_matrices(runtime::LowerContext& ctx, runtime::ValueId v, const std::string& subs,
                                    const std::string& batch, const std::string& rows, const std::string& cols) {
  std::vector<std::int64_t> perm;
  for (char c : batch + rows + cols) perm.push_back(static_cast<std::int64_t>(subs.find(c)));
  const runtime::Layout p = runtime::permuted(ctx.layout(v), perm);
  runtime::Shape shape(p.shape.begin(), p.shape.begin() + static_cast<std::ptrdiff_t>(batch.size()));
  const auto span_numel = [&](std::size_t from, std::size_t n) {
    std::int64_t m = 1;
    for (std::size_t k = from; k < from + n; ++k) m *= p.shape[k];
    return m;
  };
  shape.push_back(span_numel(batch.size(), rows.size()));
  shape.push_back(span_numel(batch.size() + rows.size(), cols.size()));
  if (auto l = runtime::viewed(p, shape)) return ctx.view(v, *l);
  const runtime::ValueId dense = shape_detail::copy_into_new(ctx, ctx.view(v, p), runtime::Layout::contiguous(p.shape, p.dtype));
  return ctx.view(dense, runtime::Layout::contiguous(shape, p.dtype));
}

// oneDNN's matmul takes at most 12 dims: batch letters beyond 10 stay with the loop.
inline constexpr std::size_t kMaxProductBatchDims = 10;

// The product's result [batch..., M, N] seen as [batch..., free_a..., free_b...], then in the output's order.
inline void lower_product(runtime::LowerContext& ctx, const Equation& e, const ProductForm& f, runtime::ValueId a,
                          runtime::ValueId b) {
  const runtime::ValueId ma = as_matrices(ctx, a, e.inputs[0], f.batch, f.free_a, f.contracted);
  const runtime::ValueId mb = as_matrices(ctx, b, e.inputs[1], f.batch, f.contracted, f.free_b);
  const runtime::ValueId prod =
      ctx.lower_piece("aten.matmul.default", {runtime::CallArg::of_tensor(ma), runtime::CallArg::of_tensor(mb)}).id;
  const std::string order = f.batch + f.free_a + f.free_b;
  runtime::Shape shape;
  for (char c : order) {
    const auto in_a = e.inputs[0].find(c);
    shape.push_back(in_a != std::string::npos ? ctx.layout(a).shape[in_a] : ctx.layout(b).shape[e.inputs[1].find(c)]);
  }
  const auto grouped = runtime::viewed(ctx.layout(prod), shape);
  if (!grouped) ctx.fail("the product " + runtime::shape_str(ctx.layout(prod).shape) + " cannot be seen as " + runtime::shape_str(shape));
  std::vector<std::int64_t> perm;
  for (char c : e.output) perm.push_back(static_cast<std::int64_t>(order.find(c)));
  ctx.set_result(ctx.view(prod, runtime::permuted(*grouped, perm)));
}

// Whether the product form's operands agree on each shared letter's size, and are float32 and not empty (what matmul takes).
inline bool product_operands_fit(const runtime::LowerContext& ctx, const Equation& e, runtime::ValueId a, runtime::ValueId b) {
  const runtime::Layout &la = ctx.layout(a), &lb = ctx.layout(b);
  if (la.dtype != DType::float32 || lb.dtype != DType::float32 || la.numel() == 0 || lb.numel() == 0) return false;
  if (la.rank() != e.inputs[0].size() || lb.rank() != e.inputs[1].size()) return false;
  for (std::size_t d = 0; d < la.rank(); ++d) {
    const auto k = e.inputs[1].find(e.inputs[0][d]);
    if (k != std::string::npos && lb.shape[k] != la.shape[d]) return false;
  }
  return true;
}

// Each operand with its size-1 dims broadcast (stride 0) to the size the other
// operands give that letter, as torch allows; sizes that differ otherwise are refused.
inline void broadcast_operands(runtime::LowerContext& ctx, const Equation& e, std::vector<runtime::ValueId>& ins) {
  std::map<char, std::int64_t> size;
  for (std::size_t i = 0; i < ins.size(); ++i) {
    const runtime::Layout& l = ctx.layout(ins[i]);
    if (l.rank() != e.inputs[i].size()) return;  // lower_naive says why
    for (std::size_t d = 0; d < l.rank(); ++d) {
      const char c = e.inputs[i][d];
      const auto known = size.find(c);
      if (known == size.end() || known->second == 1) size[c] = l.shape[d];
      else if (l.shape[d] != 1 && l.shape[d] != known->second)
        ctx.fail(std::string("equation '") + e.text + "': letter '" + c + "' has sizes " + std::to_string(known->second) +
                 " and " + std::to_string(l.shape[d]) + ", which do not broadcast");
    }
  }
  for (std::size_t i = 0; i < ins.size(); ++i) {
    runtime::Layout l = ctx.layout(ins[i]);
    bool changed = false;
    for (std::size_t d = 0; d < l.rank(); ++d)
      if (l.shape[d] == 1 && size[e.inputs[i][d]] != 1) {
        l.shape[d] = size[e.inputs[i][d]];
        l.strides[d] = 0;
        changed = true;
      }
    if (changed) ins[i] = ctx.view(ins[i], l);
  }
}

struct Einsum {
  static void lower(runtime::LowerContext& ctx) {
    std::string eq;
    for (char c : ctx.string_arg(0, "equation"))
      if (c != ' ') eq += c;
    // Operands: the positional arguments after the equation, or one list of them (aten's `tensors`).
    std::vector<runtime::ValueId> ins;
    const std::size_t nargs = ctx.node().args().size();
    if (nargs == 2 && ctx.node().args()[1].list()) ins = ctx.tensors(1, "tensors");
    else if (nargs == 1 && ctx.has(1, "tensors")) ins = ctx.tensors(1, "tensors");
    else
      for (std::size_t i = 1; i < nargs; ++i) ins.push_back(ctx.tensor(i, ""));
    std::vector<std::size_t> ranks;
    for (auto v : ins) ranks.push_back(ctx.layout(v).rank());
    const Equation e = parse_equation(ctx, eq, ranks);
    broadcast_operands(ctx, e, ins);
    if (const auto f = product_form(e);
        f && f->batch.size() <= kMaxProductBatchDims && product_operands_fit(ctx, e, ins[0], ins[1]))
      return lower_product(ctx, e, *f, ins[0], ins[1]);
    lower_naive(ctx, e, std::move(ins));
  }
};

}  // namespace einsum_detail

using einsum_kernels = KernelGroup<
    KernelEntry<"torch.functional.einsum", einsum_detail::Einsum>,
    KernelEntry<"torch.einsum", einsum_detail::Einsum>,
    KernelEntry<"aten.einsum.default", einsum_detail::Einsum>>;

}  // namespace kiln::kernels
