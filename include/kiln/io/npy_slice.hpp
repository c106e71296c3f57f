#pragma once
// Part of a .npy file without reading the rest: its header alone (dtype and
// shape), or a run of elements of the array flattened in C order. A rank that
// keeps 1/N of each weight (shard_parameters) reads 1/N of each file.
//
//   kiln::io::NpyLayout l = kiln::io::read_npy_layout("w.npy");           // header only
//   std::vector<std::byte> b = kiln::io::read_npy_elements("w.npy", 100, 50);  // elements 100..149
//
// A gzip-compressed or Fortran-order file cannot be read in part: it is read whole.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kiln/io/npy_weights.hpp"

namespace kiln::io {

namespace detail {

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

inline File open_for_reading(const std::filesystem::path& path) {
  File f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) throw IoError(path.string() + ": cannot open for reading: " + std::strerror(errno));
  return f;
}

// Up to `n` bytes from offset `at` (fewer at the end of the file).
inline std::string read_at(std::FILE* f, const std::filesystem::path& path, std::size_t at, std::size_t n) {
  std::string out(n, '\0');
  if (std::fseek(f, static_cast<long>(at), SEEK_SET) != 0) throw IoError(path.string() + ": seek error: " + std::strerror(errno));
  out.resize(std::fread(out.data(), 1, n, f));
  if (std::ferror(f)) throw IoError(path.string() + ": read error: " + std::strerror(errno));
  return out;
}

// The header bytes of an uncompressed .npy file (magic to the end of the
// header dict), or "" when the file is gzip-compressed.
inline std::string read_npy_head(std::FILE* f, const std::filesystem::path& path) {
  std::string head = read_at(f, path, 0, 12);
  if (is_gzip(head)) return {};
  if (head.size() < 10) return head;  // parse_npy_layout says what is wrong
  const auto* u = reinterpret_cast<const unsigned char*>(head.data());
  const bool v1 = u[6] == 1;
  const std::size_t len = v1 ? (u[8] | (u[9] << 8)) : (u[8] | (u[9] << 8) | (u[10] << 16) | (std::size_t(u[11]) << 24));
  return read_at(f, path, 0, (v1 ? 10 : 12) + len);
}

}  // namespace detail

// The layout of the .npy file at `path`, from its header alone (a gzip file is read whole).
inline NpyLayout read_npy_layout(const std::filesystem::path& path) {
  detail::File f = detail::open_for_reading(path);
  const std::string head = detail::read_npy_head(f.get(), path);
  if (head.empty()) return parse_npy_layout(read_file(path), path.string());
  return parse_npy_layout(head, path.string());
}

// `count` elements of the array at `path`, flattened in C order, from element
// `from` (0 <= from, from + count <= numel), as little-endian bytes. Only those
// bytes are read, after the header, unless the file is gzip or Fortran order.
inline std::vector<std::byte> read_npy_elements(const std::filesystem::path& path, std::int64_t from, std::int64_t count) {
  detail::File f = detail::open_for_reading(path);
  const std::string head = detail::read_npy_head(f.get(), path);
  const NpyLayout l = head.empty() ? parse_npy_layout(read_file(path), path.string()) : parse_npy_layout(head, path.string());
  const std::int64_t numel = l.meta.numel();
  if (from < 0 || count < 0 || from + count > numel)
    throw Error(path.string() + ": elements " + std::to_string(from) + " to " + std::to_string(from + count) +
                " asked of an array of " + std::to_string(numel));
  const std::size_t item = l.meta.itemsize();
  if (head.empty() || l.fortran_order) {  // no reading in part: all of it, then the run
    const WeightTensor whole = read_npy(path);
    const auto* p = whole.bytes.data() + static_cast<std::size_t>(from) * item;
    return {p, p + static_cast<std::size_t>(count) * item};
  }
  std::error_code ec;
  const auto file_bytes = std::filesystem::file_size(path, ec);
  if (ec) throw IoError(path.string() + ": cannot read its size: " + ec.message());
  check_npy_size(l, static_cast<std::size_t>(file_bytes), path.string());
  const std::string data = detail::read_at(f.get(), path, l.data_offset + static_cast<std::size_t>(from) * item,
                                           static_cast<std::size_t>(count) * item);
  std::vector<std::byte> out(data.size());
  std::memcpy(out.data(), data.data(), data.size());
  if (l.swap) swap_npy_bytes(out, l.meta.dtype);
  return out;
}

}  // namespace kiln::io
