#pragma once
// What every oneDNN kernel shares: the CPU engine, memory descriptors of
// kiln values, weights reordered once into the layout a primitive asks for,
// and PrimitiveStep, which runs one primitive. oneDNN 2.6 API only (Debian 12's
// libdnnl-dev; docs/ARCHITECTURE.md, Dependencies); 3.x moved scales and would change here.
//
// A PrimitiveStep's memory objects and stream belong to each RunContext
// (StepLocal), so two threads may run one compiled graph at once; their data
// handles are set on every run, which allocates nothing. The scratchpad is
// user-managed: the planner gives each step its scratch in the arena.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/runtime/strided_copy.hpp"
#include "kiln/runtime/lower_context.hpp"

namespace kiln::kernels::onednn {

inline dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

inline dnnl::memory::data_type data_type(DType d) {
  switch (d) {
    case DType::float32: return dnnl::memory::data_type::f32;
    case DType::bfloat16: return dnnl::memory::data_type::bf16;
    case DType::float16: return dnnl::memory::data_type::f16;
    case DType::int8: return dnnl::memory::data_type::s8;
    case DType::uint8: return dnnl::memory::data_type::u8;
    case DType::int32: return dnnl::memory::data_type::s32;
    default: return dnnl::memory::data_type::undef;
  }
}

// The descriptor of a kiln layout as it is (its strides); `dims` overrides the shape
// (for a view with the same strides seen with more or fewer dims, pass both).
inline dnnl::memory::desc desc_of(const runtime::Layout& l) {
  return dnnl::memory::desc(dnnl::memory::dims(l.shape.begin(), l.shape.end()), data_type(l.dtype),
                            dnnl::memory::dims(l.strides.begin(), l.strides.end()));
}
inline dnnl::memory::desc desc_of(const runtime::Layout& l, const runtime::Shape& dims, const runtime::Shape& strides) {
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()), data_type(l.dtype),
                            dnnl::memory::dims(strides.begin(), strides.end()));
}

// The implementation oneDNN picked for a primitive ("brgconv:avx512_core_amx", ...).
inline std::string implementation_of(const dnnl::primitive& p) {
  const char* impl = nullptr;
  if (dnnl_primitive_desc_query(p.get_primitive_desc(), dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
    return impl;
  return {};
}

// Whether convolutions and products with a constant weight run on bf16 copies
// of their fp32 operands (--fpmath bf16). oneDNN 2.6 ignores fpmath_mode::bf16
// on f32 tensors, so kiln converts: the weight once when packing, the source
// in the step; results and post-ops stay fp32.
inline bool bf16_products(const runtime::LowerContext& ctx) {
  return ctx.options().fpmath == runtime::CompileOptions::FpMath::bf16;
}
// Whether oneDNN fell back to its reference code (plain loops, far slower than
// its JIT kernels) for a primitive; `implementation` as implementation_of gives it.
inline bool is_reference(std::string_view implementation) { return implementation.starts_with("ref"); }
// Whether a bf16 primitive is worth keeping: oneDNN falls back to its slow
// reference code where the CPU has no bf16 instructions, and fp32 is faster.
inline bool runs_bf16_natively(std::string_view implementation) { return !is_reference(implementation); }

// `src` (plain, as described by `from`) reordered once into `to`; the result
// is a byte tensor to keep as a constant value of the program.
inline runtime::Tensor reorder_once(const runtime::Tensor& src, const dnnl::memory::desc& from,
                                    const dnnl::memory::desc& to) {
  runtime::Tensor out = runtime::Tensor::empty({static_cast<std::int64_t>(to.get_size())}, DType::uint8);
  if (from == to) {
    std::memcpy(out.raw(), src.raw(), to.get_size());
    return out;
  }
  dnnl::memory a(from, engine(), src.raw());
  dnnl::memory b(to, engine(), out.raw());
  dnnl::stream s(engine());
  dnnl::reorder(a, b).execute(s, a, b);
  s.wait();
  return out;
}

// One primitive and the values it reads and writes. A source the primitive
// wants in another layout than the value has (a graph's NCHW input for a
// channels-last convolution, a strided operand a matmul cannot read) is
// reordered in first, through the step's scratch; an addend is copied into
// the destination first (a sum post-op reads it there). A primitive that
// writes another layout than the value's (a Winograd convolution's blocked
// one) writes into the step's scratch, reordered out after.
class PrimitiveStep final : public runtime::Step {
 public:
  struct In {
    int arg;  // DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, ...
    runtime::ValueId value;
    dnnl::memory::desc given;   // how the value is laid out
    dnnl::memory::desc wanted;  // how the primitive reads it (== given: no reorder)
    std::size_t scratch_offset = 0;
  };
  // The simple form: every argument read as it is, DNNL_ARG_DST among them.
  struct Bound {
    int arg;
    runtime::ValueId value;
    dnnl::memory::desc desc;
  };
  PrimitiveStep(dnnl::primitive prim, const std::vector<Bound>& args, dnnl::memory::desc scratchpad = {})
      : prim_(std::move(prim)), scratchpad_(std::move(scratchpad)) {
    for (const Bound& b : args) {
      if (b.arg == DNNL_ARG_DST) dst_ = b.value, dst_md_ = b.desc;
      else ins_.push_back({b.arg, b.value, b.desc, b.desc, 0});
    }
    prepare();
  }
  // How the primitive writes its destination when that is not the value's
  // layout. `accumulates`: the primitive adds to what its destination holds
  // (a sum post-op), so the value (the addend) is reordered in first.
  struct DstReorder {
    dnnl::memory::desc written;
    std::size_t scratch_offset = 0;
    bool accumulates = false;
  };
  PrimitiveStep(dnnl::primitive prim, std::vector<In> ins, runtime::ValueId dst, dnnl::memory::desc dst_md,
                std::optional<runtime::ValueId> pre_fill, runtime::CopyPlan pre_copy, dnnl::memory::desc scratchpad,
                std::size_t scratchpad_offset, std::optional<DstReorder> dst_reorder = std::nullopt)
      : prim_(std::move(prim)), ins_(std::move(ins)), dst_(dst), dst_md_(std::move(dst_md)), pre_fill_(pre_fill),
        pre_copy_(pre_copy), scratchpad_(std::move(scratchpad)), scratchpad_offset_(scratchpad_offset),
        dst_written_(std::move(dst_reorder)) {
    // An addend pre-filled into the value reaches a destination written elsewhere only reordered in.
    if (dst_written_ && pre_fill_ && !dst_written_->accumulates)
      throw Error("a primitive step that pre-fills its destination and writes it elsewhere must accumulate");
    prepare();
  }

  // The scratch bytes the simple form asks the planner for (the primitive's user scratchpad).
  std::size_t scratchpad_bytes() const { return scratchpad_.get_size(); }

  std::unique_ptr<runtime::StepLocal> make_local() const override {
    auto l = std::make_unique<Local>();
    l->stream = dnnl::stream(engine());
    for (const In& i : ins_) {
      l->given.emplace_back(i.given, engine(), static_cast<void*>(DNNL_MEMORY_NONE));
      l->wanted.emplace_back(i.wanted, engine(), static_cast<void*>(DNNL_MEMORY_NONE));
      l->args.emplace(i.arg, l->wanted.back());
    }
    l->dst = dnnl::memory(dst_md_, engine(), DNNL_MEMORY_NONE);
    if (dst_written_) {
      l->written = dnnl::memory(dst_written_->written, engine(), DNNL_MEMORY_NONE);
      l->args.emplace(DNNL_ARG_DST, l->written);
    } else {
      l->args.emplace(DNNL_ARG_DST, l->dst);
    }
    if (scratchpad_.get_size() > 0) {
      l->scratch = dnnl::memory(scratchpad_, engine(), DNNL_MEMORY_NONE);
      l->args.emplace(DNNL_ARG_SCRATCHPAD, l->scratch);
    }
    return l;
  }

  void run(runtime::Frame& f) const override {
    Local& l = f.local<Local>();
    for (std::size_t k = 0; k < ins_.size(); ++k) {
      const In& i = ins_[k];
      if (!reorders_[k]) {
        l.wanted[k].set_data_handle(f.data(i.value));
      } else {
        l.given[k].set_data_handle(f.data(i.value));
        l.wanted[k].set_data_handle(f.scratch() + i.scratch_offset);
        reorders_[k].execute(l.stream, l.given[k], l.wanted[k]);
      }
    }
    if (pre_fill_) runtime::run_copy(pre_copy_, f.data(*pre_fill_), f.data(dst_), f.threads());
    l.dst.set_data_handle(f.data(dst_));
    if (dst_written_) {
      l.written.set_data_handle(f.scratch() + dst_written_->scratch_offset);
      if (dst_written_->accumulates) fill_reorder_.execute(l.stream, l.dst, l.written);
    }
    if (l.scratch) l.scratch.set_data_handle(f.scratch() + scratchpad_offset_);
    prim_.execute(l.stream, l.args);
    if (dst_written_) dst_reorder_.execute(l.stream, l.written, l.dst);
    l.stream.wait();
  }

 private:
  // The implementation oneDNN picked, and the reorders of sources and destination.
  void prepare() {
    implementation = implementation_of(prim_);
    for (const In& i : ins_)
      reorders_.push_back(i.given == i.wanted ? dnnl::reorder()
                                              : dnnl::reorder(dnnl::reorder::primitive_desc(engine(), i.given, engine(), i.wanted)));
    if (dst_written_)
      dst_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), dst_written_->written, engine(), dst_md_));
    if (dst_written_ && dst_written_->accumulates)
      fill_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), dst_md_, engine(), dst_written_->written));
  }
  struct Local : runtime::StepLocal {
    dnnl::stream stream;
    std::vector<dnnl::memory> given, wanted;
    std::unordered_map<int, dnnl::memory> args;
    dnnl::memory dst, written, scratch;
  };
  dnnl::primitive prim_;
  std::vector<In> ins_;
  std::vector<dnnl::reorder> reorders_;
  runtime::ValueId dst_ = 0;
  dnnl::memory::desc dst_md_;
  std::optional<runtime::ValueId> pre_fill_;
  runtime::CopyPlan pre_copy_{};
  dnnl::memory::desc scratchpad_;
  std::size_t scratchpad_offset_ = 0;
  std::optional<DstReorder> dst_written_;
  dnnl::reorder dst_reorder_, fill_reorder_;
};

// The constant index a getitem-like user reads (its second argument); nothing
// when there is none, as for a user that is not a getitem.
inline std::optional<std::int64_t> item_index(const Node& getitem) {
  const auto* i = getitem.args().size() > 1 ? getitem.arg(1).get_if<std::int64_t>() : nullptr;
  return i ? std::optional<std::int64_t>(*i) : std::nullopt;
}

// Whether only item 0 of a multi-output node (native_batch_norm,
// max_pool2d_with_indices, ...) is read: the kernels give the others no value.
inline bool only_first_result_read(const Node& n) {
  for (const Node* u : n.users()) {
    const auto i = item_index(*u);
    if (!i || (*i != 0 && u->num_users() > 0)) return false;
  }
  return true;
}

// An attribute with a user scratchpad (what PrimitiveStep expects).
inline dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}
// The same, with the arithmetic the compile options ask for (--fpmath bf16).
inline dnnl::primitive_attr primitive_attr_for(const runtime::LowerContext& ctx) {
  dnnl::primitive_attr a = user_scratchpad_attr();
  if (ctx.options().fpmath == runtime::CompileOptions::FpMath::bf16) a.set_fpmath_mode(dnnl::fpmath_mode::bf16);
  return a;
}

// A step's scratch, handed out in 64-byte aligned pieces (reorder targets, the scratchpad).
struct ScratchPlan {
  std::size_t bytes = 0;
  std::size_t take(std::size_t n) {
    const std::size_t at = bytes;
    bytes += (n + 63) / 64 * 64;
    return at;
  }
};

// Adds `step` to the node being lowered, reading `reads`, writing `writes`,
// with its scratchpad planned in the arena.
inline void add_primitive_step(runtime::LowerContext& ctx, std::unique_ptr<PrimitiveStep> step,
                               std::vector<runtime::ValueId> reads, std::vector<runtime::ValueId> writes) {
  const std::size_t scratch = step->scratchpad_bytes();
  ctx.add_step(std::move(step), std::move(reads), std::move(writes), scratch);
}

}  // namespace kiln::kernels::onednn
