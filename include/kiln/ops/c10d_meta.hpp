#pragma once
// Shape rules of the _c10d_functional collectives: what each produces from its
// input's meta (PyTorch's meta functions). all_gather stacks the group's inputs
// along dim 0, reduce_scatter splits dim 0 among the group, all_reduce and
// wait_tensor keep the input's shape; every result is contiguous.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/core/node.hpp"
#include "kiln/core/print.hpp"
#include "kiln/core/tensor_meta.hpp"
#include "kiln/ops/c10d_functional.hpp"

namespace kiln::c10d_meta {

inline TensorMeta contiguous(std::vector<Dim> shape, DType dtype) {
  std::vector<Dim> stride(shape.size(), std::int64_t{1});
  std::int64_t run = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    stride[i] = run;
    if (is_static(shape[i])) run *= std::max<std::int64_t>(1, std::get<std::int64_t>(shape[i]));
  }
  return TensorMeta{std::move(shape), dtype, std::move(stride)};
}

namespace detail {
inline std::string shape_text(const std::vector<Dim>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + format_dim(shape[i]);
  return s + "]";
}
// The static first dimension of a collective's input: collectives split or stack it.
inline std::int64_t first_dim(const TensorMeta& in, std::string_view op) {
  if (in.rank() == 0) throw Error(std::string(op) + ": needs an input of rank >= 1, got a 0-d tensor");
  if (!is_static(in.shape[0]))
    throw Error(std::string(op) + ": needs a static first dimension, got " + format_dim(in.shape[0]));
  return std::get<std::int64_t>(in.shape[0]);
}
inline void check_group_size(std::int64_t group_size, std::string_view op) {
  if (group_size < 1) throw Error(std::string(op) + ": group_size must be >= 1, got " + std::to_string(group_size));
}
}  // namespace detail

// [d0, ...] -> [d0 * group_size, ...]
inline TensorMeta all_gather_into_tensor(const TensorMeta& in, std::int64_t group_size) {
  detail::check_group_size(group_size, "all_gather_into_tensor");
  std::vector<Dim> shape = in.shape;
  shape.at(0) = detail::first_dim(in, "all_gather_into_tensor") * group_size;
  return contiguous(std::move(shape), in.dtype);
}

// The `_out` form returns `out`, which must hold exactly the gathered tensor.
inline TensorMeta all_gather_into_tensor_out(const TensorMeta& in, std::int64_t group_size, const TensorMeta& out) {
  const TensorMeta want = all_gather_into_tensor(in, group_size);
  if (out.shape != want.shape || out.dtype != want.dtype)
    throw Error("all_gather_into_tensor_out: out has shape " + detail::shape_text(out.shape) + " " +
                std::string(dtype_name(out.dtype)) + ", the gathered input needs " + detail::shape_text(want.shape) + " " +
                std::string(dtype_name(want.dtype)));
  return out;
}

// [d0, ...] -> [d0 / group_size, ...]; d0 must divide evenly.
inline TensorMeta reduce_scatter_tensor(const TensorMeta& in, std::int64_t group_size) {
  detail::check_group_size(group_size, "reduce_scatter_tensor");
  const std::int64_t d0 = detail::first_dim(in, "reduce_scatter_tensor");
  if (d0 % group_size != 0)
    throw Error("reduce_scatter_tensor: first dimension " + std::to_string(d0) + " is not divisible by group_size " +
                std::to_string(group_size));
  std::vector<Dim> shape = in.shape;
  shape[0] = d0 / group_size;
  return contiguous(std::move(shape), in.dtype);
}

inline TensorMeta all_reduce(const TensorMeta& in) { return contiguous(in.shape, in.dtype); }
inline TensorMeta wait_tensor(const TensorMeta& in) { return in; }

namespace detail {
inline const TensorMeta& input_meta(const Node& n, const Arg* a, std::string_view what) {
  const Node* in = a ? a->node() : nullptr;
  if (!in) throw Error("node " + n.name() + ": " + std::string(what) + " is not a node");
  if (!in->meta.val.tensor()) throw Error("node " + n.name() + ": " + std::string(what) + " " + in->name() + " has no tensor meta");
  return *in->meta.val.tensor();
}
inline std::int64_t int_arg(const Node& n, const Arg* a, std::string_view what) {
  const std::int64_t* v = a ? a->get_if<std::int64_t>() : nullptr;
  if (!v) throw Error("node " + n.name() + ": " + std::string(what) + " must be an integer");
  return *v;
}
}  // namespace detail

// The meta of a collective or wait node from its arguments; nullopt for any
// other node. Errors name the node.
inline std::optional<TensorMeta> infer(const Node& n) {
  auto arg = [&](std::size_t i, std::string_view name) { return get_arg_value(n, i, name); };
  try {
    if (n.is_call(c10d_functional::all_gather_into_tensor))
      return all_gather_into_tensor(detail::input_meta(n, arg(0, "input"), "input"),
                                    detail::int_arg(n, arg(1, "group_size"), "group_size"));
    if (n.is_call(c10d_functional::all_gather_into_tensor_out))
      return all_gather_into_tensor_out(detail::input_meta(n, arg(0, "input"), "input"),
                                        detail::int_arg(n, arg(1, "group_size"), "group_size"),
                                        detail::input_meta(n, arg(3, "out"), "out"));
    if (n.is_call(c10d_functional::reduce_scatter_tensor))
      return reduce_scatter_tensor(detail::input_meta(n, arg(0, "input"), "input"),
                                   detail::int_arg(n, arg(2, "group_size"), "group_size"));
    if (n.is_call(c10d_functional::all_reduce))
      return all_reduce(detail::input_meta(n, arg(0, "input"), "input"));
    if (n.is_call(c10d_functional::wait_tensor))
      return wait_tensor(detail::input_meta(n, arg(0, "tensor"), "tensor"));
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind("node ", 0) == 0) throw;
    throw Error("node " + n.name() + ": " + what);
  }
  return std::nullopt;
}

}  // namespace kiln::c10d_meta
