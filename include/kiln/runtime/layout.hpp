#pragma once
// A tensor's layout (dtype, shape, strides in elements) and the layout algebra
// behind every zero-copy view: view/reshape, permute, transpose, select, slice,
// expand, unsqueeze, squeeze and broadcasting. The owning Tensor and the
// lowering of shape ops both use these, so a view means the same in both.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"

namespace kiln::runtime {

using Shape = std::vector<std::int64_t>;

// A shape or layout that an op cannot take; the message says which and why.
class ShapeError : public Error {
 public:
  using Error::Error;
};

inline std::string shape_str(std::span<const std::int64_t> s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

inline std::int64_t shape_numel(std::span<const std::int64_t> s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

inline Shape contiguous_strides(std::span<const std::int64_t> shape) {
  Shape st(shape.size());
  std::int64_t acc = 1;
  for (std::size_t k = shape.size(); k-- > 0;) {
    st[k] = acc;
    acc *= std::max<std::int64_t>(shape[k], 1);
  }
  return st;
}

// A dimension index in [-rank, rank) made non-negative; `what` names the argument in errors.
inline std::int64_t normalize_dim(std::int64_t dim, std::int64_t rank, const char* what = "dim") {
  const std::int64_t r = std::max<std::int64_t>(rank, 1);
  if (dim < -r || dim >= r)
    throw ShapeError(std::string(what) + " " + std::to_string(dim) + " is out of range for a tensor of rank " +
                     std::to_string(rank));
  return dim < 0 ? dim + r : dim;
}

struct Layout {
  DType dtype = DType::float32;
  Shape shape;
  Shape strides;  // in elements; same rank as shape

  static Layout contiguous(Shape shape, DType dtype = DType::float32) {
    Layout l{dtype, std::move(shape), {}};
    l.strides = contiguous_strides(l.shape);
    return l;
  }
  std::size_t rank() const { return shape.size(); }
  std::int64_t numel() const { return shape_numel(shape); }
  std::size_t itemsize() const { return dtype_itemsize(dtype); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * itemsize(); }
  // Row-major with no gaps (size-1 dimensions may have any stride).
  bool is_contiguous() const {
    std::int64_t acc = 1;
    for (std::size_t k = shape.size(); k-- > 0;) {
      if (shape[k] != 1 && strides[k] != acc) return false;
      acc *= shape[k];
    }
    return true;
  }
  // Elements from the first to one past the last addressed one (the storage a view needs).
  std::int64_t span_elements() const {
    if (numel() == 0) return 0;
    std::int64_t last = 0;
    for (std::size_t k = 0; k < shape.size(); ++k) last += (shape[k] - 1) * strides[k];
    return last + 1;
  }
  friend bool operator==(const Layout&, const Layout&) = default;
};

// A view of a layout: the new layout and where it starts, in elements from the old start.
struct ViewOf {
  Layout layout;
  std::int64_t offset = 0;
};

// `requested` with a -1 filled in from `numel`, as view/reshape read it.
inline Shape infer_size(std::span<const std::int64_t> requested, std::int64_t numel) {
  Shape out(requested.begin(), requested.end());
  std::int64_t known = 1;
  std::optional<std::size_t> infer;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer) throw ShapeError("only one dimension can be -1 in " + shape_str(requested));
      infer = i;
    } else if (out[i] < 0) {
      throw ShapeError("invalid dimension " + std::to_string(out[i]) + " in " + shape_str(requested));
    } else if (__builtin_mul_overflow(known, out[i], &known)) {
      throw ShapeError("shape " + shape_str(requested) + " has more elements than a 64-bit count holds");
    }
  }
  if (infer) {
    if (known == 0 || numel % known != 0)
      throw ShapeError("shape " + shape_str(requested) + " is invalid for " + std::to_string(numel) + " elements");
    out[*infer] = numel / known;
  } else if (known != numel) {
    throw ShapeError("shape " + shape_str(requested) + " is invalid for " + std::to_string(numel) + " elements");
  }
  return out;
}

// The strides `l` viewed as `shape` would have without copying, or nullopt when
// its strides do not allow it (PyTorch's computeStride: each run of merged old
// dimensions must be contiguous within itself).
inline std::optional<Shape> view_strides(const Layout& l, std::span<const std::int64_t> shape) {
  if (l.is_contiguous()) return contiguous_strides(shape);
  const auto& os = l.shape;
  const auto& ost = l.strides;
  Shape nst(shape.size());
  if (l.numel() == 0) return contiguous_strides(shape);
  std::int64_t view_d = static_cast<std::int64_t>(shape.size()) - 1;
  std::int64_t chunk_base_stride = ost.empty() ? 1 : ost.back();
  std::int64_t tensor_numel = 1;
  std::int64_t view_numel = 1;
  for (std::int64_t td = static_cast<std::int64_t>(os.size()) - 1; td >= 0; --td) {
    tensor_numel *= os[td];
    if (td == 0 || (os[td - 1] != 1 && ost[td - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        nst[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (td > 0) {
        chunk_base_stride = ost[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return nst;
}

// Zero-copy view to `requested` (may hold one -1), or nullopt when a copy is needed.
inline std::optional<Layout> viewed(const Layout& l, std::span<const std::int64_t> requested) {
  Shape shape = infer_size(requested, l.numel());
  auto st = view_strides(l, shape);
  if (!st) return std::nullopt;
  return Layout{l.dtype, std::move(shape), std::move(*st)};
}

inline Layout permuted(const Layout& l, std::span<const std::int64_t> dims) {
  if (dims.size() != l.rank())
    throw ShapeError("permute: " + std::to_string(dims.size()) + " dims given for a tensor of rank " +
                     std::to_string(l.rank()));
  Layout out{l.dtype, Shape(l.rank()), Shape(l.rank())};
  std::vector<bool> seen(l.rank(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const auto d = normalize_dim(dims[i], static_cast<std::int64_t>(l.rank()), "permute dim");
    if (seen[d]) throw ShapeError("permute: dim " + std::to_string(dims[i]) + " appears twice");
    seen[d] = true;
    out.shape[i] = l.shape[d];
    out.strides[i] = l.strides[d];
  }
  return out;
}

inline Layout transposed(const Layout& l, std::int64_t a, std::int64_t b) {
  if (l.rank() == 0) return l;
  const auto r = static_cast<std::int64_t>(l.rank());
  a = normalize_dim(a, r, "transpose dim0");
  b = normalize_dim(b, r, "transpose dim1");
  Layout out = l;
  std::swap(out.shape[a], out.shape[b]);
  std::swap(out.strides[a], out.strides[b]);
  return out;
}

inline Layout unsqueezed(const Layout& l, std::int64_t dim) {
  const auto r = static_cast<std::int64_t>(l.rank());
  dim = normalize_dim(dim, r + 1, "unsqueeze dim");
  Layout out = l;
  const std::int64_t st = dim < r ? l.shape[dim] * l.strides[dim] : 1;
  out.shape.insert(out.shape.begin() + dim, 1);
  out.strides.insert(out.strides.begin() + dim, st);
  return out;
}

// Drops `dims` that have size 1 (others are kept, as torch.squeeze does).
inline Layout squeezed(const Layout& l, std::span<const std::int64_t> dims) {
  const auto r = static_cast<std::int64_t>(l.rank());
  std::vector<bool> drop(l.rank(), false);
  for (auto d : dims) {
    if (r == 0) continue;
    const auto k = normalize_dim(d, r, "squeeze dim");
    drop[k] = l.shape[k] == 1;
  }
  Layout out{l.dtype, {}, {}};
  for (std::size_t k = 0; k < l.rank(); ++k)
    if (!drop[k]) out.shape.push_back(l.shape[k]), out.strides.push_back(l.strides[k]);
  return out;
}
inline Layout squeezed_all(const Layout& l) {
  Layout out{l.dtype, {}, {}};
  for (std::size_t k = 0; k < l.rank(); ++k)
    if (l.shape[k] != 1) out.shape.push_back(l.shape[k]), out.strides.push_back(l.strides[k]);
  return out;
}

inline ViewOf selected(const Layout& l, std::int64_t dim, std::int64_t index) {
  const auto r = static_cast<std::int64_t>(l.rank());
  if (r == 0) throw ShapeError("select: cannot select from a 0-d tensor");
  dim = normalize_dim(dim, r, "select dim");
  const auto n = l.shape[dim];
  if (index < -n || index >= n)
    throw ShapeError("select: index " + std::to_string(index) + " is out of range for size " + std::to_string(n));
  if (index < 0) index += n;
  ViewOf v{l, index * l.strides[dim]};
  v.layout.shape.erase(v.layout.shape.begin() + dim);
  v.layout.strides.erase(v.layout.strides.begin() + dim);
  return v;
}

// Python slice semantics: start/stop clamped, negative values from the end.
inline ViewOf sliced(const Layout& l, std::int64_t dim, std::optional<std::int64_t> start,
                     std::optional<std::int64_t> stop, std::int64_t step = 1) {
  const auto r = static_cast<std::int64_t>(l.rank());
  dim = normalize_dim(dim, r, "slice dim");
  if (step <= 0) throw ShapeError("slice: step must be positive, got " + std::to_string(step));
  const auto n = l.shape[dim];
  auto clampi = [n](std::int64_t v) {
    if (v < 0) v += n;
    return std::clamp<std::int64_t>(v, 0, n);
  };
  const std::int64_t s = start ? clampi(*start) : 0;
  const std::int64_t e = std::max(s, stop ? clampi(*stop) : n);
  ViewOf v{l, s * l.strides[dim]};
  v.layout.shape[dim] = (e - s + step - 1) / step;
  v.layout.strides[dim] = l.strides[dim] * step;
  return v;
}

// Broadcast to `shape` (which may hold -1 for "keep"): new and expanded dims get stride 0.
inline Layout expanded(const Layout& l, std::span<const std::int64_t> shape) {
  if (shape.size() < l.rank())
    throw ShapeError("expand: the target " + shape_str(shape) + " has fewer dims than the tensor " +
                     shape_str(l.shape));
  Layout out{l.dtype, Shape(shape.begin(), shape.end()), Shape(shape.size(), 0)};
  const std::size_t lead = shape.size() - l.rank();
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (k < lead) {
      if (shape[k] < 0) throw ShapeError("expand: -1 is not allowed for a new leading dim");
      continue;
    }
    const auto have = l.shape[k - lead];
    const auto want = shape[k] == -1 ? have : shape[k];
    out.shape[k] = want;
    if (have == want) out.strides[k] = l.strides[k - lead];
    else if (have != 1)
      throw ShapeError("expand: size " + std::to_string(have) + " cannot become " + std::to_string(want) + " (" +
                       shape_str(l.shape) + " to " + shape_str(shape) + ")");
  }
  return out;
}

// A dense layout of `shape` (same rank as `like`) with its dims laid out in
// the order of `like`'s strides: channels-last stays channels-last through
// element-wise ops and pooling. Row-major when `like` is not dense itself
// (overlapping or gappy strides).
inline Layout dense_in_order_of(const Layout& like, const Shape& shape, DType dtype) {
  Layout out = Layout::contiguous(shape, dtype);
  const std::size_t r = like.rank();
  if (shape.size() != r) return out;
  std::vector<std::size_t> order(r);  // outermost first
  for (std::size_t k = 0; k < r; ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return like.strides[a] > like.strides[b]; });
  std::int64_t acc = 1;
  for (std::size_t k = r; k-- > 0;) {  // is `like` dense in this order?
    const std::size_t d = order[k];
    if (like.shape[d] != 1 && like.strides[d] != acc) return out;
    acc *= like.shape[d];
  }
  acc = 1;
  for (std::size_t k = r; k-- > 0;) {
    out.strides[order[k]] = acc;
    acc *= std::max<std::int64_t>(shape[order[k]], 1);
  }
  return out;
}
inline Layout dense_like(const Layout& like, DType dtype) { return dense_in_order_of(like, like.shape, dtype); }

// Channels-last strides for a rank-4 (NCHW) or rank-5 (NCDHW) shape: channels innermost.
inline Layout channels_last(Shape shape, DType dtype = DType::float32) {
  Layout l = Layout::contiguous(shape, dtype);
  if (shape.size() < 3) return l;
  const std::size_t r = shape.size();
  std::int64_t acc = 1;
  l.strides[1] = acc;
  acc *= shape[1];
  for (std::size_t k = r; k-- > 2;) {
    l.strides[k] = acc;
    acc *= shape[k];
  }
  l.strides[0] = acc;
  return l;
}

// NumPy broadcasting of two shapes.
inline Shape broadcast_shapes(std::span<const std::int64_t> a, std::span<const std::int64_t> b) {
  const std::size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (std::size_t k = 0; k < r; ++k) {
    const std::int64_t x = k + a.size() >= r ? a[k + a.size() - r] : 1;
    const std::int64_t y = k + b.size() >= r ? b[k + b.size() - r] : 1;
    if (x != y && x != 1 && y != 1)
      throw ShapeError("shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
    out[k] = x == 1 ? y : x;
  }
  return out;
}

}  // namespace kiln::runtime
