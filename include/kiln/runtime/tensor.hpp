#pragma once
// kiln::runtime::Tensor: a dtype, a shape, strides and 64-byte aligned storage
// shared between a tensor and its zero-copy views. What users hand to and get
// from a CompiledGraph; .npy in and out through kiln/io/npy_weights.hpp.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <new>
#include <span>
#include <type_traits>

#include "kiln/io/npy_weights.hpp"
#include "kiln/runtime/layout.hpp"
#include "kiln/runtime/strided_copy.hpp"

namespace kiln::runtime {

inline constexpr std::size_t kTensorAlignment = 64;

namespace detail {
struct AlignedFree {
  void operator()(std::byte* p) const { std::free(p); }
};
// 64-byte aligned, uninitialised bytes (at least one, so that empty tensors have storage too).
inline std::shared_ptr<std::byte> aligned_bytes(std::size_t n) {
  const std::size_t size = (std::max<std::size_t>(n, 1) + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(kTensorAlignment, size));
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<std::byte>(p, AlignedFree{});
}

}  // namespace detail

class Tensor {
 public:
  Tensor() = default;

  // A new contiguous tensor; its values are unset.
  static Tensor empty(Shape shape, DType dtype = DType::float32) {
    Tensor t;
    t.layout_ = Layout::contiguous(std::move(shape), dtype);
    t.storage_ = detail::aligned_bytes(t.layout_.nbytes());
    t.data_ = t.storage_.get();
    return t;
  }
  static Tensor zeros(Shape shape, DType dtype = DType::float32) {
    Tensor t = empty(std::move(shape), dtype);
    std::memset(t.data_, 0, t.layout_.nbytes());
    return t;
  }
  template <class T>
  static Tensor from_values(Shape shape, std::span<const T> values) {
    constexpr auto dt = io::dtype_of<T>();
    static_assert(dt.has_value(), "Tensor::from_values: T has no kiln dtype");
    Tensor t = empty(std::move(shape), *dt);
    if (static_cast<std::int64_t>(values.size()) != t.numel())
      throw ShapeError("Tensor::from_values: " + std::to_string(values.size()) + " values for shape " +
                       shape_str(t.shape()));
    if (!values.empty()) std::memcpy(t.data_, values.data(), values.size_bytes());
    return t;
  }
  // Borrows `data` (not owned: it must outlive the tensor and its views).
  static Tensor wrap(void* data, Layout layout) {
    Tensor t;
    t.layout_ = std::move(layout);
    t.data_ = static_cast<std::byte*>(data);
    return t;
  }
  static Tensor from_weight(const io::WeightTensor& w) {
    Tensor t = empty(Shape(w.shape.begin(), w.shape.end()), w.dtype);
    if (!w.bytes.empty()) std::memcpy(t.data_, w.bytes.data(), w.bytes.size());
    return t;
  }
  io::WeightTensor to_weight() const {
    io::WeightTensor w;
    w.dtype = dtype();
    w.shape.assign(shape().begin(), shape().end());
    w.bytes.resize(layout_.nbytes());
    copy_to_contiguous(data_, layout_, w.bytes.data());
    return w;
  }

  bool defined() const { return data_ != nullptr; }
  const Layout& layout() const { return layout_; }
  DType dtype() const { return layout_.dtype; }
  const Shape& shape() const { return layout_.shape; }
  const Shape& strides() const { return layout_.strides; }
  std::int64_t size(std::int64_t dim) const {
    return layout_.shape[normalize_dim(dim, static_cast<std::int64_t>(rank()))];
  }
  std::size_t rank() const { return layout_.rank(); }
  std::int64_t numel() const { return layout_.numel(); }
  std::size_t nbytes() const { return layout_.nbytes(); }
  bool is_contiguous() const { return layout_.is_contiguous(); }

  void* raw() const { return data_; }
  template <class T>
  T* data() const {
    check_type<T>();
    return reinterpret_cast<T*>(data_);
  }
  // The element at a multi-index (for tests and tools; kernels use raw pointers).
  template <class T>
  T& at(std::span<const std::int64_t> index) const {
    check_type<T>();
    std::int64_t off = 0;
    for (std::size_t k = 0; k < index.size(); ++k) off += index[k] * layout_.strides[k];
    return reinterpret_cast<T*>(data_)[off];
  }

  // Zero-copy views (they share storage with this tensor).
  Tensor view(std::span<const std::int64_t> shape) const {
    auto l = viewed(layout_, shape);
    if (!l) throw ShapeError("view: " + shape_str(this->shape()) + " with strides " + shape_str(strides()) +
                             " cannot be viewed as " + shape_str(shape) + " without a copy; use reshape");
    return with(std::move(*l), 0);
  }
  Tensor view(std::initializer_list<std::int64_t> shape) const { return view(std::span(shape.begin(), shape.size())); }
  // A view when the strides allow, a contiguous copy otherwise.
  Tensor reshape(std::span<const std::int64_t> shape) const {
    if (auto l = viewed(layout_, shape)) return with(std::move(*l), 0);
    return contiguous().view(shape);
  }
  Tensor permute(std::span<const std::int64_t> dims) const { return with(permuted(layout_, dims), 0); }
  Tensor permute(std::initializer_list<std::int64_t> d) const { return permute(std::span(d.begin(), d.size())); }
  Tensor transpose(std::int64_t a, std::int64_t b) const { return with(transposed(layout_, a, b), 0); }
  Tensor unsqueeze(std::int64_t dim) const { return with(unsqueezed(layout_, dim), 0); }
  Tensor squeeze(std::int64_t dim) const { return with(squeezed(layout_, std::span(&dim, 1)), 0); }
  Tensor expand(std::span<const std::int64_t> shape) const { return with(expanded(layout_, shape), 0); }
  Tensor select(std::int64_t dim, std::int64_t index) const {
    auto v = selected(layout_, dim, index);
    return with(std::move(v.layout), v.offset);
  }
  Tensor slice(std::int64_t dim, std::int64_t start, std::int64_t stop, std::int64_t step = 1) const {
    auto v = sliced(layout_, dim, start, stop, step);
    return with(std::move(v.layout), v.offset);
  }

  // This tensor when contiguous, else a contiguous copy.
  Tensor contiguous() const {
    if (is_contiguous()) return *this;
    return clone();
  }
  Tensor clone() const {
    Tensor t = empty(shape(), dtype());
    copy_to_contiguous(data_, layout_, t.data_);
    return t;
  }

 private:
  friend class RunContext;
  template <class T>
  void check_type() const {
    constexpr auto dt = io::dtype_of<std::remove_const_t<T>>();
    if constexpr (dt.has_value()) {
      if (*dt != dtype())
        throw Error("Tensor::data<" + std::string(dtype_name(*dt)) + ">: the tensor holds " +
                    std::string(dtype_name(dtype())));
    }
  }
  Tensor with(Layout l, std::int64_t offset_elements) const {
    Tensor t;
    t.storage_ = storage_;
    t.layout_ = std::move(l);
    t.data_ = data_ + offset_elements * static_cast<std::int64_t>(layout_.itemsize());
    return t;
  }

  std::shared_ptr<std::byte> storage_;  // null for a borrowed tensor
  std::byte* data_ = nullptr;
  Layout layout_;
};

// Weights by get_attr target (or by the target of a placeholder that stands
// for a parameter), as CompiledGraph::compile takes them.
using Weights = std::map<std::string, Tensor, std::less<>>;

}  // namespace kiln::runtime
