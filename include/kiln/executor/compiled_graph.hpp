#pragma once
// CompiledGraph: a graph lowered once, run many times. Tensors in, tensors out:
//
//   auto file = kiln::io::read_fx_json("model/graph.json");
//   auto cg = kiln::runtime::CompiledGraph::compile(file);
//   std::vector<Tensor> out = cg.run({x});          // simple: a context per call
//
//   auto ctx = cg.make_context(/*threads=*/2);      // hot loop: nothing allocated per run
//   const std::vector<Tensor>& y = ctx.run({x});    // views into ctx's arena
//
// A CompiledGraph is immutable: several threads may run it at once, each with
// its own RunContext (own arena, own per-step state), with the same results.
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kiln/core/parallel_shares.hpp"
#include "kiln/io/graph_file.hpp"
#include "kiln/io/graph_weights.hpp"
#include "kiln/io/npy_weights.hpp"
#include "kiln/io/weight_store.hpp"
#include "kiln/kernels/registry.hpp"
#include "kiln/executor/lowering.hpp"

namespace kiln::runtime {

namespace detail {
// "a, b, c" or, past `most` names, "a, b, c, ... (N in all)".
inline std::string name_list(const std::vector<std::string>& names, std::size_t most = 6) {
  std::string s;
  for (std::size_t i = 0; i < names.size() && i < most; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > most) s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s;
}
}  // namespace detail

// Inputs of the wrong count, shape or dtype; the message names the input.
class InputError : public Error {
 public:
  using Error::Error;
};

// A run's memory (its arena, its input staging) could not be allocated; the
// message says how many bytes and which node's buffer is the largest.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

// Threads a run may use: at least 1, at most the CPUs this process may run on
// (more only queue behind each other, and OpenMP fails to start a hundred thousand).
// OpenMP's own count where it is built in: with OMP_PROC_BIND set, libgomp binds
// the main thread to one CPU as the program starts, and the affinity mask then says 1.
inline int usable_threads(int requested) {
  auto cpus = static_cast<int>(std::min<std::size_t>(available_cpus(), 1 << 16));
#ifdef _OPENMP
  cpus = std::max(cpus, std::min(omp_get_num_procs(), 1 << 16));
#endif
  return std::clamp(requested, 1, std::max(cpus, 1));
}

class RunContext;

// Every weight an fx-graph-json file's table names, read from its .npy files.
inline Weights weights_of(const io::GraphFile& f) {
  Weights w;
  for (const auto& [attr, rel] : f.weights) w.emplace(attr, Tensor::from_weight(io::load_weight(f, attr)));
  return w;
}

// Every weight of `store` (the file's table, and those passes added or created),
// moved out of it: a weight the passes already read is not read again, the
// others are read once. The store reads a taken weight's file again if asked.
inline Weights take_weights(io::WeightStore& store) {
  Weights w;
  for (const std::string& name : store.names()) {
    if (std::optional<io::WeightTensor> t = store.take(name)) w.emplace(name, Tensor::from_weight(*t));
    else if (const io::WeightTensor* held = store.find(name)) w.emplace(name, Tensor::from_weight(*held));
  }
  return w;
}

// `base` with the weights passes created in `store` (fuse_conv_bn's folded ones) added.
inline Weights with_created_weights(Weights base, const io::WeightStore& store) {
  for (const std::string& name : store.created())
    base.insert_or_assign(name, Tensor::from_weight(store.created_value(name)));
  return base;
}

class CompiledGraph {
 public:
  static CompiledGraph compile(const Graph& g, const Weights& weights, CompileOptions options = {},
                               const kernels::KernelTable& table = kernels::default_kernels()) {
    CompiledGraph cg;
    options.threads = usable_threads(options.threads);
#ifdef _OPENMP
    // oneDNN sizes a primitive's work split by the OpenMP threads when it is
    // made; made for more threads than a run gives it, it waits on idle ones.
    struct RestoreThreads {
      int n;
      ~RestoreThreads() { omp_set_num_threads(n); }
    } restore{omp_get_max_threads()};
    omp_set_num_threads(options.threads);
#endif
    cg.program_ = std::make_shared<const Program>(lower(g, weights, table, options));
    cg.options_ = options;
    return cg;
  }
  // The graph of an fx-graph-json file, with the weights its table names.
  static CompiledGraph compile(const io::GraphFile& f, CompileOptions options = {}) {
    return compile(f.graph, weights_of(f), options);
  }

  RunContext make_context(int threads = 0) const;
  // Runs in a context of its own and returns copies of the outputs.
  std::vector<Tensor> run(std::span<const Tensor> inputs) const;
  std::vector<Tensor> run(std::initializer_list<Tensor> inputs) const {
    return run(std::span<const Tensor>(inputs.begin(), inputs.size()));
  }

  std::size_t num_inputs() const { return program_->inputs.size(); }
  const std::string& input_name(std::size_t i) const { return program_->input_names[i]; }
  const Layout& input_layout(std::size_t i) const { return program_->values[program_->inputs[i]].layout; }
  std::size_t num_outputs() const { return program_->outputs.size(); }
  const Layout& output_layout(std::size_t i) const { return program_->values[program_->outputs[i]].layout; }
  std::size_t num_steps() const { return program_->steps.size(); }
  const Step& step(std::size_t i) const { return *program_->steps[i]; }
  // The arena one run needs, and the most bytes of intermediates alive at once.
  std::size_t arena_bytes() const { return program_->arena_bytes; }
  std::size_t peak_live_bytes() const { return program_->peak_live_bytes; }
  std::size_t constant_bytes() const {
    std::size_t n = 0;
    for (const Tensor& t : program_->constants) n += t.defined() ? t.nbytes() : 0;
    return n;
  }
  const Program& program() const { return *program_; }

 private:
  friend class RunContext;
  std::shared_ptr<const Program> program_;
  CompileOptions options_;
};

// One thread's means to run a CompiledGraph: the arena, each step's local
// state and the output tensors, made once. run() allocates nothing.
class RunContext {
 public:
  RunContext(const CompiledGraph& cg, int threads = 0) : program_(cg.program_) {
    const Program& p = *program_;
    arena_ = allocate(p.arena_bytes, "the arena");
    frame_.start(p, usable_threads(threads > 0 ? threads : cg.options_.threads));
    locals_.reserve(p.steps.size());
    for (const auto& s : p.steps) locals_.push_back(s->make_local());
    for (ValueId v = 0; v < p.values.size(); ++v)
      if (p.values[v].storage == Storage::arena) frame_.bind(v, arena_.get() + p.values[v].arena_offset);
    for (std::size_t k = 0; k < p.inputs.size(); ++k) {
      const Layout& l = p.values[p.inputs[k]].layout;
      try {
        staging_.push_back(Tensor::empty(l.shape, l.dtype));
      } catch (const std::bad_alloc&) {
        throw out_of_memory(l.nbytes(), "the copy of input " + p.input_names[k]);
      }
    }
    for (ValueId id : p.outputs) outputs_.push_back(Tensor::wrap(nullptr, p.values[id].layout));
  }

  // The threads each run uses (usable_threads of what was asked).
  int threads() const { return frame_.threads(); }
  void set_threads(int n) { frame_.set_threads(usable_threads(n)); }
  // When set, run() adds each step's time in seconds to (*times)[step].
  void set_step_times(std::vector<double>* times) {
    step_times_ = times;
    if (times) times->resize(program_->steps.size(), 0.0);
  }

  // Runs the graph on `inputs`; the outputs are views into this context's
  // arena (or into an input or a constant) and stay valid until the next run.
  const std::vector<Tensor>& run(std::span<const Tensor> inputs) {
    const Program& p = *program_;
    if (inputs.size() != p.inputs.size())
      throw InputError("the graph takes " + std::to_string(p.inputs.size()) + " input" +
                       (p.inputs.size() == 1 ? "" : "s") + " (" + detail::name_list(p.input_names) + "), " +
                       std::to_string(inputs.size()) + " given" +
                       (inputs.size() > p.inputs.size() ? " (placeholders bound to weights are constants, not inputs)" : ""));
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      const Layout& want = p.values[p.inputs[k]].layout;
      const Tensor& t = inputs[k];
      if (!t.defined() && want.numel() > 0) throw InputError("input " + p.input_names[k] + ": no tensor given");
      if (t.dtype() != want.dtype || t.shape() != want.shape)
        throw InputError("input " + p.input_names[k] + ": expected " + std::string(dtype_name(want.dtype)) + " " +
                         shape_str(want.shape) + ", got " + std::string(dtype_name(t.dtype())) + " " +
                         shape_str(t.shape()));
      if (t.is_contiguous()) {
        frame_.bind(p.inputs[k], static_cast<std::byte*>(t.raw()));
      } else {
        copy_to_contiguous(static_cast<const std::byte*>(t.raw()), t.layout(), static_cast<std::byte*>(staging_[k].raw()));
        frame_.bind(p.inputs[k], static_cast<std::byte*>(staging_[k].raw()));
      }
    }
    frame_.bind_views();
#ifdef _OPENMP
    omp_set_num_threads(frame_.threads());
#endif
    for (std::size_t s = 0; s < p.steps.size(); ++s) {
      frame_.set_step(arena_.get() + p.steps[s]->scratch_offset, locals_[s].get());
      if (step_times_) {
        const auto t0 = std::chrono::steady_clock::now();
        p.steps[s]->run(frame_);
        (*step_times_)[s] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      } else {
        p.steps[s]->run(frame_);
      }
    }
    for (std::size_t k = 0; k < p.outputs.size(); ++k) outputs_[k].data_ = frame_.data(p.outputs[k]);
    return outputs_;
  }
  const std::vector<Tensor>& run(std::initializer_list<Tensor> inputs) {
    return run(std::span<const Tensor>(inputs.begin(), inputs.size()));
  }

 private:
  // `bytes` of 64-byte aligned memory, or OutOfMemory.
  std::shared_ptr<std::byte> allocate(std::size_t bytes, const std::string& what) const {
    try {
      return detail::aligned_bytes(bytes);
    } catch (const std::bad_alloc&) {
      throw out_of_memory(bytes, what);
    }
  }
  // The error for `bytes` of `what` that could not be had, naming the node
  // with the largest buffer in the arena (where a user would look first).
  OutOfMemory out_of_memory(std::size_t bytes, const std::string& what) const {
    const ValueInfo* largest = nullptr;
    for (const ValueInfo& i : program_->values)
      if (i.storage == Storage::arena && (!largest || i.layout.nbytes() > largest->layout.nbytes())) largest = &i;
    std::string msg = "cannot allocate " + what + ": " + std::to_string(bytes) + " bytes";
    if (largest)
      msg += "; the largest buffer in the arena is node " + largest->name + "'s " +
             std::string(dtype_name(largest->layout.dtype)) + " " + shape_str(largest->layout.shape) + " (" +
             std::to_string(largest->layout.nbytes()) + " bytes)";
    return OutOfMemory(msg);
  }

  std::shared_ptr<const Program> program_;
  std::shared_ptr<std::byte> arena_;
  Frame frame_;
  std::vector<std::unique_ptr<StepLocal>> locals_;
  std::vector<Tensor> staging_;
  std::vector<Tensor> outputs_;
  std::vector<double>* step_times_ = nullptr;
};

inline RunContext CompiledGraph::make_context(int threads) const { return RunContext(*this, threads); }

inline std::vector<Tensor> CompiledGraph::run(std::span<const Tensor> inputs) const {
  RunContext ctx(*this);
  const auto& out = ctx.run(inputs);
  std::vector<Tensor> copies;
  copies.reserve(out.size());
  for (const Tensor& t : out) copies.push_back(t.clone());
  return copies;
}

}  // namespace kiln::runtime
