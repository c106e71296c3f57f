#pragma once
// What lowering makes of a graph and a CompiledGraph runs: a table of values
// (tensors in the arena, inputs, constants, views of other values) and a flat
// list of steps, one kernel call each. Steps read and write values through a
// Frame, which holds each value's address for one run.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/runtime/tensor.hpp"

namespace kiln::runtime {

using ValueId = std::uint32_t;

// Where a tensor value's bytes live during a run.
enum class Storage : std::uint8_t {
  arena,     // a buffer the planner places in the run's arena
  input,     // the caller's input `index`
  constant,  // constant `index` of the program (weights, pre-packed forms)
  view,      // `offset` elements into value `base`, with its own layout
};

struct ValueInfo {
  Layout layout;
  Storage storage = Storage::arena;
  std::uint32_t index = 0;      // input or constant index
  ValueId base = 0;             // for a view: the value it looks into
  std::int64_t offset = 0;      // for a view: elements from base's start
  std::size_t arena_offset = 0; // for an arena buffer: bytes from the arena's start (set by the planner)
  std::string name;             // the node it comes from (for errors and profiles)
};

class Frame;
struct Program;

// Per-run-context state of one step (oneDNN memory objects, a stream): made
// once per RunContext so that two threads never share it and runs allocate nothing.
struct StepLocal {
  virtual ~StepLocal() = default;
};

// One kernel call. Made once when lowering; run() must not allocate.
class Step {
 public:
  virtual ~Step() = default;
  virtual void run(Frame& frame) const = 0;
  virtual std::unique_ptr<StepLocal> make_local() const { return nullptr; }
  std::string node;     // the node it runs
  std::string op_type;  // its kernel's target, for profiles
  std::string implementation;  // what runs it where there is a choice (oneDNN's implementation), for profiles
  // A step that does more than write its outputs (a collective exchanges
  // data with other ranks) runs on every run, never folded into a constant.
  bool has_effects = false;
  std::size_t scratch_bytes = 0;
  std::size_t scratch_offset = 0;  // in the arena (set by the planner)
  std::vector<ValueId> reads;
  std::vector<ValueId> writes;
};

// Each value's address for one run, plus the running step's local state and scratch.
class Frame {
 public:
  Frame() = default;
  std::byte* data(ValueId v) const { return ptrs_[v]; }
  template <class T>
  T* data_as(ValueId v) const { return reinterpret_cast<T*>(ptrs_[v]); }
  const Layout& layout(ValueId v) const { return (*values_)[v].layout; }
  std::byte* scratch() const { return scratch_; }
  template <class L>
  L& local() const { return static_cast<L&>(*local_); }
  int threads() const { return threads_; }

  // Used by what runs steps (RunContext, lowering's constant folding):
  // a frame over `program`'s values with every constant bound, nothing else yet.
  void start(const Program& program, int threads);
  void bind(ValueId v, std::byte* p) { ptrs_[v] = p; }
  // Points each view whose base is bound into that base.
  void bind_views() {
    for (ValueId v = 0; v < values_->size(); ++v) {
      const ValueInfo& i = (*values_)[v];
      if (i.storage == Storage::view && ptrs_[i.base])
        ptrs_[v] = ptrs_[i.base] + i.offset * static_cast<std::int64_t>(i.layout.itemsize());
    }
  }
  void set_step(std::byte* scratch, StepLocal* local) {
    scratch_ = scratch;
    local_ = local;
  }
  void set_threads(int n) { threads_ = n; }

 private:
  std::vector<std::byte*> ptrs_;
  const std::deque<ValueInfo>* values_ = nullptr;
  std::byte* scratch_ = nullptr;
  StepLocal* local_ = nullptr;
  int threads_ = 1;
};

struct Program {
  // A deque: a kernel may hold a value's layout by reference while it adds values.
  std::deque<ValueInfo> values;
  std::vector<std::unique_ptr<Step>> steps;
  std::vector<Tensor> constants;
  std::vector<ValueId> inputs;   // per placeholder, in order
  std::vector<ValueId> outputs;  // the output node's tensors, flattened in order
  std::vector<std::string> input_names;
  std::size_t arena_bytes = 0;
  std::size_t peak_live_bytes = 0;  // the most bytes of arena buffers live at once (the planner's lower bound)
};

inline void Frame::start(const Program& program, int threads) {
  values_ = &program.values;
  threads_ = threads;
  ptrs_.assign(program.values.size(), nullptr);
  for (ValueId v = 0; v < program.values.size(); ++v) {
    const ValueInfo& i = program.values[v];
    if (i.storage == Storage::constant && program.constants[i.index].defined())
      ptrs_[v] = static_cast<std::byte*>(program.constants[i.index].raw());
  }
}

}  // namespace kiln::runtime
