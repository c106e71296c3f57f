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

 private:
  friend class RunContext;
  friend class ConstantFolder;
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

}  // namespace kiln::runtime
