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
#include <cstring>
#include <exception>
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
#include "kiln/executor/rebatch.hpp"

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

// oneDNN sizes a primitive's work split by the OpenMP threads when it is made;
// made for more threads than a run gives it, it waits on idle ones. Lowering
// runs inside one of these, set to the threads that will run the primitives.
class LoweringThreads {
 public:
  explicit LoweringThreads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
  }
  ~LoweringThreads() {
#ifdef _OPENMP
    omp_set_num_threads(before_);
#endif
  }
  LoweringThreads(const LoweringThreads&) = delete;
  LoweringThreads& operator=(const LoweringThreads&) = delete;

 private:
#ifdef _OPENMP
  int before_ = omp_get_max_threads();
#endif
};

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
    cg.options_ = options;
    if (options.split_batch > 0 && cg.compile_slices(g, weights, table)) return cg;
    const LoweringThreads threads(options.threads);
    cg.program_ = std::make_shared<const Program>(lower(g, weights, table, options));
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
  const Layout& input_layout(std::size_t i) const {
    return split_ ? split_->inputs[i] : program_->values[program_->inputs[i]].layout;
  }
  std::size_t num_outputs() const { return program_->outputs.size(); }
  const Layout& output_layout(std::size_t i) const {
    return split_ ? split_->outputs[i] : program_->values[program_->outputs[i]].layout;
  }

  // Where a batch runs as slices (CompileOptions::split_batch): the graph's
  // batch and the samples per slice. The steps, the arena and the program are
  // then a slice's, and every thread has an arena of its own.
  struct BatchSplit {
    std::int64_t batch = 0, slice = 0;
    std::vector<Layout> inputs, outputs;  // the whole batch's, row-major
  };
  const BatchSplit* batch_split() const { return split_.get(); }
  // Why split_batch was asked for and the graph runs whole (empty otherwise).
  const std::string& batch_split_refusal() const { return split_refusal_; }
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
  // Lowers `g` rebatched to options_.split_batch samples for one thread, or
  // records why it cannot run so and returns false.
  bool compile_slices(const Graph& g, const Weights& weights, const kernels::KernelTable& table) {
    const std::int64_t slice = options_.split_batch;
    try {
      Graph sliced = rebatch(g, weights, slice);
      const std::int64_t batch = *graph_batch(g, weights);
      if (batch / slice < 2)
        throw RebatchError("rebatch: the batch of " + std::to_string(batch) + " is a single slice of " + std::to_string(slice));
      CompileOptions one = options_;
      one.threads = 1;
      one.split_batch = 0;
      {
        const LoweringThreads threads(1);  // each slice's primitives are made for the one thread that runs them
        program_ = std::make_shared<const Program>(lower(sliced, weights, table, one));
      }
      auto split = std::make_shared<BatchSplit>();
      split->batch = batch;
      split->slice = slice;
      const auto whole = [&](const Layout& l) {
        Shape shape = l.shape;
        shape[0] = shape[0] / slice * batch;
        return Layout::contiguous(std::move(shape), l.dtype);
      };
      for (ValueId v : program_->inputs) split->inputs.push_back(whole(program_->values[v].layout));
      for (ValueId v : program_->outputs) split->outputs.push_back(whole(program_->values[v].layout));
      split_ = std::move(split);
      return true;
    } catch (const RebatchError& e) {
      split_refusal_ = e.what();
    } catch (const Error& e) {
      // A kernel refused the rebatched graph: its rules let through what they should not have.
      split_refusal_ = std::string("rebatch: the graph rebatched to ") + std::to_string(slice) + " does not compile: " + e.what();
    }
    program_.reset();
    return false;
  }

  std::shared_ptr<const Program> program_;
  CompileOptions options_;
  std::shared_ptr<const BatchSplit> split_;
  std::string split_refusal_;
};

// One thread's means to run a CompiledGraph: the arena, each step's local
// state and the output tensors, made once. run() allocates nothing.
class RunContext {
 public:
  RunContext(const CompiledGraph& cg, int threads = 0) : program_(cg.program_), split_(cg.split_) {
    const int wanted = usable_threads(threads > 0 ? threads : cg.options_.threads);
    if (split_) {
      split_threads_ = wanted;
      for (std::size_t k = 0; k < split_->inputs.size(); ++k)
        staging_.push_back(empty_or_fail(split_->inputs[k], "the copy of input " + program_->input_names[k]));
      for (const Layout& l : split_->outputs) outputs_.push_back(empty_or_fail(l, "an output of the whole batch"));
      add_lanes();
      return;
    }
    start(wanted);
  }

  // The threads each run uses (usable_threads of what was asked).
  int threads() const { return split_ ? split_threads_ : frame_.threads(); }
  void set_threads(int n) {
    if (!split_) return frame_.set_threads(usable_threads(n));
    split_threads_ = usable_threads(n);
    add_lanes();
  }
  // When set, run() adds each step's time in seconds to (*times)[step]; where
  // the batch runs as slices, the times of the slices the first thread ran.
  void set_step_times(std::vector<double>* times) {
    if (split_) return lanes_.front()->set_step_times(times);
    step_times_ = times;
    if (times) times->resize(program_->steps.size(), 0.0);
  }

  // Runs the graph on `inputs`; the outputs are views into this context's
  // arena (or into an input or a constant) and stay valid until the next run.
  const std::vector<Tensor>& run(std::span<const Tensor> inputs) {
    check_inputs(inputs);
    if (split_) return run_slices(inputs);
    const Program& p = *program_;
    for (std::size_t k = 0; k < inputs.size(); ++k) frame_.bind(p.inputs[k], contiguous_input(k, inputs[k]));
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
  // A context of one thread for one slice at a time (a lane of a split run).
  struct Lane {};
  RunContext(std::shared_ptr<const Program> program, Lane) : program_(std::move(program)) { start(1); }

  void start(int threads) {
    const Program& p = *program_;
    arena_ = allocate(p.arena_bytes, "the arena");
    frame_.start(p, threads);
    locals_.reserve(p.steps.size());
    for (const auto& s : p.steps) locals_.push_back(s->make_local());
    for (ValueId v = 0; v < p.values.size(); ++v)
      if (p.values[v].storage == Storage::arena) frame_.bind(v, arena_.get() + p.values[v].arena_offset);
    for (std::size_t k = 0; k < p.inputs.size(); ++k)
      staging_.push_back(empty_or_fail(p.values[p.inputs[k]].layout, "the copy of input " + p.input_names[k]));
    for (ValueId id : p.outputs) outputs_.push_back(Tensor::wrap(nullptr, p.values[id].layout));
  }

  // The inputs' count, shapes and dtypes against the graph's (the whole batch's where split).
  void check_inputs(std::span<const Tensor> inputs) const {
    const Program& p = *program_;
    if (inputs.size() != p.inputs.size())
      throw InputError("the graph takes " + std::to_string(p.inputs.size()) + " input" +
                       (p.inputs.size() == 1 ? "" : "s") + " (" + detail::name_list(p.input_names) + "), " +
                       std::to_string(inputs.size()) + " given" +
                       (inputs.size() > p.inputs.size() ? " (placeholders bound to weights are constants, not inputs)" : ""));
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      const Layout& want = split_ ? split_->inputs[k] : p.values[p.inputs[k]].layout;
      const Tensor& t = inputs[k];
      if (!t.defined() && want.numel() > 0) throw InputError("input " + p.input_names[k] + ": no tensor given");
      if (t.dtype() != want.dtype || t.shape() != want.shape)
        throw InputError("input " + p.input_names[k] + ": expected " + std::string(dtype_name(want.dtype)) + " " +
                         shape_str(want.shape) + ", got " + std::string(dtype_name(t.dtype())) + " " +
                         shape_str(t.shape()));
    }
  }

  // A row-major tensor of `l`'s shape for `what`, or OutOfMemory.
  Tensor empty_or_fail(const Layout& l, const std::string& what) const {
    try {
      return Tensor::empty(l.shape, l.dtype);
    } catch (const std::bad_alloc&) {
      throw out_of_memory(l.nbytes(), what);
    }
  }

  // Input k's elements in row-major order: the tensor itself, or its copy in the staging buffer.
  std::byte* contiguous_input(std::size_t k, const Tensor& t) {
    if (t.is_contiguous()) return static_cast<std::byte*>(t.raw());
    copy_to_contiguous(static_cast<const std::byte*>(t.raw()), t.layout(), static_cast<std::byte*>(staging_[k].raw()));
    return static_cast<std::byte*>(staging_[k].raw());
  }

  // A lane per thread, each with its arena and its inputs: views of one slice.
  void add_lanes() {
    while (lanes_.size() < static_cast<std::size_t>(split_threads_)) {
      lanes_.push_back(std::unique_ptr<RunContext>(new RunContext(program_, Lane{})));
      std::vector<Tensor> in;
      for (ValueId v : program_->inputs) in.push_back(Tensor::wrap(nullptr, program_->values[v].layout));
      lane_inputs_.push_back(std::move(in));
    }
  }

  // The batch as slices: each thread takes the next slice when it is done with
  // one, runs it on its lane (oneDNN and kiln's kernels see one thread) and
  // writes the slice's rows of each output.
  const std::vector<Tensor>& run_slices(std::span<const Tensor> inputs) {
    const std::size_t n_in = inputs.size();
    std::vector<std::byte*>& base = slice_base_;
    base.resize(n_in);
    for (std::size_t k = 0; k < n_in; ++k) base[k] = contiguous_input(k, inputs[k]);
    const std::int64_t slices = split_->batch / split_->slice;
    const int lanes = static_cast<int>(std::min<std::int64_t>(split_threads_, slices));
    std::exception_ptr error;
    const auto run_slice = [&](RunContext& lane, std::vector<Tensor>& in, std::int64_t s) {
      for (std::size_t k = 0; k < n_in; ++k)
        in[k].data_ = base[k] + static_cast<std::size_t>(s) * in[k].nbytes();
      const std::vector<Tensor>& out = lane.run(in);
      for (std::size_t k = 0; k < out.size(); ++k) {
        std::byte* dst = static_cast<std::byte*>(outputs_[k].raw()) + static_cast<std::size_t>(s) * out[k].nbytes();
        if (out[k].is_contiguous()) std::memcpy(dst, out[k].raw(), out[k].nbytes());
        else copy_to_contiguous(static_cast<const std::byte*>(out[k].raw()), out[k].layout(), dst);
      }
    };
#ifdef _OPENMP
#pragma omp parallel num_threads(lanes)
    {
      const auto lane = static_cast<std::size_t>(omp_get_thread_num());
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t s = 0; s < slices; ++s) {
        try {
          run_slice(*lanes_[lane], lane_inputs_[lane], s);
        } catch (...) {
#pragma omp critical(kiln_split_error)
          if (!error) error = std::current_exception();
        }
      }
    }
#else
    (void)lanes;
    for (std::int64_t s = 0; s < slices && !error; ++s) {
      try {
        run_slice(*lanes_[0], lane_inputs_[0], s);
      } catch (...) {
        error = std::current_exception();
      }
    }
#endif
    if (error) std::rethrow_exception(error);
    return outputs_;
  }

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
  std::shared_ptr<const CompiledGraph::BatchSplit> split_;
  // A split run's: a context per thread (a lane) and its slice's inputs.
  int split_threads_ = 1;
  std::vector<std::unique_ptr<RunContext>> lanes_;
  std::vector<std::vector<Tensor>> lane_inputs_;
  std::vector<std::byte*> slice_base_;
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
