#pragma once
// What every oneDNN kernel shares: the CPU engine, memory descriptors of
// kiln values, weights reordered once into the layout a primitive asks for,
// and PrimitiveStep, which runs one primitive. oneDNN 2.6 API only (see
// ../shared/docs/DEPENDENCIES.md); 3.x moved scales and would change here.
//
// A PrimitiveStep's memory objects and stream belong to each RunContext
// (StepLocal), so two threads may run one compiled graph at once; their data
// handles are set on every run, which allocates nothing. The scratchpad is
// user-managed: the planner gives each step its scratch in the arena.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

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

// One primitive and the values it reads and writes, each seen through the
// descriptor the primitive was created with.
class PrimitiveStep final : public runtime::Step {
 public:
  struct Bound {
    int arg;  // DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, ...
    runtime::ValueId value;
    dnnl::memory::desc desc;
  };

  PrimitiveStep(dnnl::primitive prim, std::vector<Bound> args, dnnl::memory::desc scratchpad = {})
      : prim_(std::move(prim)), args_(std::move(args)), scratchpad_(std::move(scratchpad)) {}

  // The scratch bytes to ask the planner for (the primitive's user scratchpad).
  std::size_t scratchpad_bytes() const { return scratchpad_.get_size(); }

  std::unique_ptr<runtime::StepLocal> make_local() const override {
    auto l = std::make_unique<Local>();
    l->stream = dnnl::stream(engine());
    for (const Bound& b : args_) {
      dnnl::memory m(b.desc, engine(), DNNL_MEMORY_NONE);
      l->args.emplace(b.arg, m);
      l->bound.emplace_back(m, b.value);
    }
    if (scratchpad_.get_size() > 0) {
      l->scratch = dnnl::memory(scratchpad_, engine(), DNNL_MEMORY_NONE);
      l->args.emplace(DNNL_ARG_SCRATCHPAD, l->scratch);
    }
    return l;
  }

  void run(runtime::Frame& frame) const override {
    Local& l = frame.local<Local>();
    for (auto& [m, v] : l.bound) m.set_data_handle(frame.data(v));
    if (l.scratch) l.scratch.set_data_handle(frame.scratch());
    prim_.execute(l.stream, l.args);
    l.stream.wait();
  }

 private:
  struct Local : runtime::StepLocal {
    dnnl::stream stream;
    std::unordered_map<int, dnnl::memory> args;
    std::vector<std::pair<dnnl::memory, runtime::ValueId>> bound;
    dnnl::memory scratch;
  };
  dnnl::primitive prim_;
  std::vector<Bound> args_;
  dnnl::memory::desc scratchpad_;
};

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

// Adds `step` to the node being lowered, reading `reads`, writing `writes`,
// with its scratchpad planned in the arena.
inline void add_primitive_step(runtime::LowerContext& ctx, std::unique_ptr<PrimitiveStep> step,
                               std::vector<runtime::ValueId> reads, std::vector<runtime::ValueId> writes) {
  const std::size_t scratch = step->scratchpad_bytes();
  ctx.add_step(std::move(step), std::move(reads), std::move(writes), scratch);
}

}  // namespace kiln::kernels::onednn
