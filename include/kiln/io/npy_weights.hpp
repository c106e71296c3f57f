#pragma once
// Weights: the .npy files named by a graph file's "weights" table.
//
//   kiln::io::GraphFile f = kiln::io::read_fx_json("graph.json");
//   std::map<std::string, kiln::io::WeightTensor> w = kiln::io::load_weights(f);   // graph_weights.hpp
//   std::vector<float> v = w.at("w").values<float>();
//
// A WeightTensor is type-erased (dtype, shape, raw bytes in C order, native
// little-endian), so one map holds weights of every dtype. The .npy header is
// read here (format versions 1, 2 and 3); Fortran-order and big-endian arrays
// are converted. For xtensor, see kiln/io/npy_xtensor.hpp.
#include <algorithm>
#include <bit>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/io/errors.hpp"
#include "kiln/io/graph_file.hpp"
#include "kiln/io/gzip.hpp"

namespace kiln::io {

static_assert(std::endian::native == std::endian::little, "kiln::io's .npy support assumes a little-endian host");

// The kiln dtype of a C++ element type (float -> float32, ...), for typed access.
template <class T>
constexpr std::optional<DType> dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::float32;
  else if constexpr (std::is_same_v<T, double>) return DType::float64;
  else if constexpr (std::is_same_v<T, std::int8_t>) return DType::int8;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return DType::uint8;
  else if constexpr (std::is_same_v<T, std::int16_t>) return DType::int16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DType::int32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DType::int64;
  else if constexpr (std::is_same_v<T, bool>) return DType::bool_;
  else if constexpr (std::is_same_v<T, std::complex<float>>) return DType::complex64;
  else return std::nullopt;
}

struct WeightTensor {
  DType dtype = DType::float32;
  std::vector<std::int64_t> shape;  // empty: a 0-d array (one element)
  std::vector<std::byte> bytes;     // numel() * itemsize bytes, C order, little-endian

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  std::size_t itemsize() const { return dtype_itemsize(dtype); }

  // The elements as T, which must match dtype (float for float32, ...);
  // float16 and bfloat16 have no C++ type here: use `bytes`.
  template <class T>
  std::vector<T> values() const {
    constexpr auto want = dtype_of<T>();
    static_assert(want.has_value(), "values<T>: T has no kiln dtype (use float, double, int8_t, ..., bool)");
    if (*want != dtype)
      throw Error("WeightTensor::values<" + std::string(dtype_name(*want)) + ">: the tensor holds " +
                  std::string(dtype_name(dtype)));
    const std::size_t n = static_cast<std::size_t>(numel());
    std::vector<T> out(n);
    if constexpr (std::is_same_v<T, bool>) {
      for (std::size_t i = 0; i < n; ++i) out[i] = bytes[i] != std::byte{0};
    } else {
      if (n) std::memcpy(out.data(), bytes.data(), n * sizeof(T));
    }
    return out;
  }

  friend bool operator==(const WeightTensor&, const WeightTensor&) = default;
};

namespace detail {

// numpy's descr for each dtype it can hold (bfloat16 and float8 have none).
inline std::optional<std::string_view> npy_descr(DType d) {
  switch (d) {
    case DType::float32: return "<f4";
    case DType::float64: return "<f8";
    case DType::float16: return "<f2";
    case DType::int8: return "|i1";
    case DType::uint8: return "|u1";
    case DType::int16: return "<i2";
    case DType::int32: return "<i4";
    case DType::int64: return "<i8";
    case DType::bool_: return "|b1";
    case DType::complex64: return "<c8";
    default: return std::nullopt;
  }
}

// The header dict of a .npy file: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

inline NpyHeader parse_npy_header_dict(std::string_view h, const std::string& src) {
  auto fail = [&](const std::string& what) -> FormatError {
    return FormatError(src + ": bad .npy header: " + what + " (header: " + std::string(h) + ")");
  };
  std::size_t i = 0;
  auto ws = [&] {
    while (i < h.size() && (h[i] == ' ' || h[i] == '\n' || h[i] == '\t' || h[i] == '\r')) ++i;
  };
  auto expect = [&](char c) {
    ws();
    if (i >= h.size() || h[i] != c) throw fail(std::string("expected '") + c + "'");
    ++i;
  };
  auto quoted = [&]() {
    ws();
    if (i >= h.size() || (h[i] != '\'' && h[i] != '"')) throw fail("expected a quoted string");
    const char q = h[i++];
    const std::size_t start = i;
    while (i < h.size() && h[i] != q) ++i;
    if (i >= h.size()) throw fail("unterminated string");
    return std::string(h.substr(start, i++ - start));
  };
  NpyHeader out;
  bool seen_descr = false, seen_fortran = false, seen_shape = false;
  expect('{');
  for (;;) {
    ws();
    if (i < h.size() && h[i] == '}') break;
    const std::string key = quoted();
    expect(':');
    ws();
    if (key == "descr") {
      if (i < h.size() && h[i] == '[') throw fail("structured dtypes are not supported");
      out.descr = quoted();
      seen_descr = true;
    } else if (key == "fortran_order") {
      if (h.substr(i, 4) == "True") out.fortran_order = true, i += 4;
      else if (h.substr(i, 5) == "False") out.fortran_order = false, i += 5;
      else throw fail("fortran_order must be True or False");
      seen_fortran = true;
    } else if (key == "shape") {
      expect('(');
      for (;;) {
        ws();
        if (i < h.size() && h[i] == ')') break;
        std::int64_t v = 0;
        const std::size_t start = i;
        while (i < h.size() && h[i] >= '0' && h[i] <= '9') {
          if (v > (INT64_MAX - 9) / 10) throw fail("dimension too large");
          v = v * 10 + (h[i++] - '0');
        }
        if (i == start) throw fail("a shape holds non-negative integers");
        // numpy writes Python ints, which older versions suffixed with 'L'.
        if (i < h.size() && h[i] == 'L') ++i;
        out.shape.push_back(v);
        ws();
        if (i < h.size() && h[i] == ',') ++i;
        else if (i < h.size() && h[i] == ')') break;
        else throw fail("expected ',' or ')' in the shape");
      }
      ++i;
      seen_shape = true;
    } else {
      throw fail("unknown key '" + key + "'");
    }
    ws();
    if (i < h.size() && h[i] == ',') ++i;
    else if (i < h.size() && h[i] == '}') break;
    else throw fail("expected ',' or '}'");
  }
  if (!seen_descr || !seen_fortran || !seen_shape) throw fail("it needs 'descr', 'fortran_order' and 'shape'");
  return out;
}

// Reorders a Fortran-order (column-major) array into C order.
inline std::vector<std::byte> fortran_to_c_order(const std::vector<std::byte>& in, const std::vector<std::int64_t>& shape,
                                                 std::size_t itemsize) {
  const std::size_t rank = shape.size();
  if (rank < 2 || in.empty()) return in;  // the two orders agree
  std::vector<std::byte> out(in.size());
  std::vector<std::size_t> fstride(rank);  // element strides of the Fortran layout
  std::size_t acc = 1;
  for (std::size_t k = 0; k < rank; ++k) fstride[k] = acc, acc *= static_cast<std::size_t>(shape[k]);
  std::vector<std::int64_t> idx(rank, 0);
  std::size_t src = 0;  // Fortran offset of the C-order multi-index idx
  const std::size_t n = in.size() / itemsize;
  for (std::size_t dst = 0; dst < n; ++dst) {
    std::memcpy(out.data() + dst * itemsize, in.data() + src * itemsize, itemsize);
    for (std::size_t k = rank; k-- > 0;) {  // C order: the last index runs fastest
      if (++idx[k] < shape[k]) {
        src += fstride[k];
        break;
      }
      src -= fstride[k] * static_cast<std::size_t>(shape[k] - 1);
      idx[k] = 0;
    }
  }
  return out;
}

}  // namespace detail

// What a .npy header says: the array's dtype and shape (a WeightTensor without
// bytes), how its data is stored, and where the data starts.
struct NpyLayout {
  WeightTensor meta;
  std::string descr;           // as the header writes it: '<f4', '>i8', ...
  bool swap = false;           // big-endian data, swapped when read
  bool fortran_order = false;  // converted to C order when read
  std::size_t data_offset = 0;
  std::size_t data_bytes = 0;  // numel * itemsize
};

// Parses the header at the start of `data` (the first bytes of a .npy file; the
// data may follow or not). `source` names it in error messages.
inline NpyLayout parse_npy_layout(std::string_view data, const std::string& source = "<npy>") {
  auto fail = [&](const std::string& what) -> FormatError { return FormatError(source + ": " + what); };
  static constexpr std::string_view kMagic("\x93NUMPY", 6);
  if (data.size() < 10 || data.substr(0, 6) != kMagic)
    throw fail("not a .npy file (it does not start with \\x93NUMPY)");
  const auto major = static_cast<unsigned char>(data[6]);
  std::size_t header_len = 0, header_start = 0;
  const auto* u = reinterpret_cast<const unsigned char*>(data.data());
  if (major == 1) {
    header_len = u[8] | (u[9] << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12) throw fail("truncated .npy header");
    header_len = u[8] | (u[9] << 8) | (u[10] << 16) | (std::size_t(u[11]) << 24);
    header_start = 12;
  } else {
    throw fail("unsupported .npy format version " + std::to_string(major));
  }
  if (data.size() < header_start + header_len) throw fail("truncated .npy header");
  const detail::NpyHeader h =
      detail::parse_npy_header_dict(data.substr(header_start, header_len), source);

  NpyLayout l;
  WeightTensor& t = l.meta;
  t.shape = h.shape;
  l.fortran_order = h.fortran_order;
  l.data_offset = header_start + header_len;
  l.descr = h.descr;
  const std::string& d = h.descr;
  if (d.size() < 3) throw fail("unsupported dtype '" + d + "'");
  const char order = d[0];
  const std::string_view code = std::string_view(d).substr(1);
  if (order == '>') l.swap = true;
  else if (order != '<' && order != '|' && order != '=') throw fail("unsupported byte order in dtype '" + d + "'");
  if (code == "f4") t.dtype = DType::float32;
  else if (code == "f8") t.dtype = DType::float64;
  else if (code == "f2") t.dtype = DType::float16;
  else if (code == "i1") t.dtype = DType::int8;
  else if (code == "u1") t.dtype = DType::uint8;
  else if (code == "i2") t.dtype = DType::int16;
  else if (code == "i4") t.dtype = DType::int32;
  else if (code == "i8") t.dtype = DType::int64;
  else if (code == "b1") t.dtype = DType::bool_;
  else if (code == "c8") t.dtype = DType::complex64;
  else throw fail("unsupported dtype '" + d + "' (kiln reads f2, f4, f8, i1, i2, i4, i8, u1, b1, c8)");

  const std::size_t item = t.itemsize();
  // The product of the non-zero dimensions must fit too: a zero dimension
  // makes the array empty but would hide an overflow from the check, and
  // numel() (an int64) multiplies every dimension.
  std::size_t nonzero = 1;
  bool empty = false;
  for (auto dim : t.shape) {
    if (dim == 0) {
      empty = true;
      continue;
    }
    if (nonzero > static_cast<std::size_t>(INT64_MAX) / static_cast<std::size_t>(dim) / item)
      throw fail("shape too large: its element count overflows");
    nonzero *= static_cast<std::size_t>(dim);
  }
  l.data_bytes = (empty ? 0 : nonzero) * item;
  return l;
}

// The data of `l` must fill the rest of a file of `file_bytes` bytes exactly.
inline void check_npy_size(const NpyLayout& l, std::size_t file_bytes, const std::string& source) {
  const std::size_t body = file_bytes - l.data_offset;
  if (body != l.data_bytes) {
    throw FormatError(source + ": data size mismatch: shape and dtype '" + l.descr + "' need " + std::to_string(l.data_bytes) +
                      " bytes, the file holds " + std::to_string(body) + (body < l.data_bytes ? " (truncated?)" : ""));
  }
}

// Swaps each element of `bytes` (of `dtype`) from big- to little-endian.
inline void swap_npy_bytes(std::vector<std::byte>& bytes, DType dtype) {
  const std::size_t item = dtype_itemsize(dtype);
  if (item <= 1) return;
  // complex64 is two float32s, each swapped on its own.
  const std::size_t unit = dtype == DType::complex64 ? 4 : item;
  for (std::size_t k = 0; k < bytes.size(); k += unit) std::reverse(bytes.begin() + k, bytes.begin() + k + unit);
}

// Parses the bytes of a .npy file. `source` names it in error messages.
inline WeightTensor parse_npy(std::string_view data, const std::string& source = "<npy>") {
  NpyLayout l = parse_npy_layout(data, source);
  check_npy_size(l, data.size(), source);
  WeightTensor t = std::move(l.meta);
  const auto* p = reinterpret_cast<const std::byte*>(data.data() + l.data_offset);
  t.bytes.assign(p, p + l.data_bytes);
  if (l.swap) swap_npy_bytes(t.bytes, t.dtype);
  if (l.fortran_order) t.bytes = detail::fortran_to_c_order(t.bytes, t.shape, t.itemsize());
  return t;
}

// Reads a .npy file (gzip-compressed ones too).
inline WeightTensor read_npy(const std::filesystem::path& path) { return parse_npy(read_file(path), path.string()); }

// The .npy bytes of `t` (format version 1.0, as numpy.save writes them).
inline std::string to_npy(const WeightTensor& t) {
  const auto descr = detail::npy_descr(t.dtype);
  if (!descr) throw Error("to_npy: numpy has no dtype for " + std::string(dtype_name(t.dtype)));
  if (t.bytes.size() != static_cast<std::size_t>(t.numel()) * t.itemsize())
    throw Error("to_npy: the tensor holds " + std::to_string(t.bytes.size()) + " bytes, its shape and dtype need " +
                std::to_string(static_cast<std::size_t>(t.numel()) * t.itemsize()));
  std::string shape = "(";
  for (std::size_t i = 0; i < t.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape[i]);
  if (t.shape.size() == 1) shape += ",";
  shape += ")";
  std::string dict = "{'descr': '" + std::string(*descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces and a newline so the data starts at a multiple of 64 bytes.
  std::size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  if (dict.size() > 65535) throw Error("to_npy: header too long");
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  out.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  return out;
}

inline void write_npy(const std::filesystem::path& path, const WeightTensor& t) { write_file(path, to_npy(t)); }

// A WeightTensor holding `values` with `shape` (C order).
template <class T>
WeightTensor make_weight(std::vector<std::int64_t> shape, const std::vector<T>& values) {
  constexpr auto dt = dtype_of<T>();
  static_assert(dt.has_value(), "make_weight: T has no kiln dtype");
  WeightTensor t;
  t.dtype = *dt;
  t.shape = std::move(shape);
  if (static_cast<std::int64_t>(values.size()) != t.numel())
    throw Error("make_weight: " + std::to_string(values.size()) + " values for a shape of " +
                std::to_string(t.numel()) + " elements");
  t.bytes.resize(values.size() * sizeof(T));
  if constexpr (std::is_same_v<T, bool>) {
    for (std::size_t i = 0; i < values.size(); ++i) t.bytes[i] = std::byte{values[i] ? std::uint8_t(1) : std::uint8_t(0)};
  } else {
    if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  }
  return t;
}

}  // namespace kiln::io
