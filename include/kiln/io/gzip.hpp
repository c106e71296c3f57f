#pragma once
// Whole-file reading and writing, with gzip (zlib) compression. Whether a file
// is compressed is decided by its first two bytes (1f 8b), not by its name, so
// a gzip file called graph.json reads as well as a plain graph.json.gz.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <string_view>

#include "kiln/io/errors.hpp"

namespace kiln::io {

// True when `bytes` starts with the gzip magic bytes 1f 8b.
inline bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// Compresses `data` into one gzip member. `level`: 0 (store) .. 9 (smallest),
// or Z_DEFAULT_COMPRESSION (6).
inline std::string gzip_compress(std::string_view data, int level = Z_DEFAULT_COMPRESSION) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw IoError("gzip: cannot initialise zlib deflate (level " + std::to_string(level) + ")");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, deflateEnd);
  std::string out;
  out.resize(deflateBound(&z, static_cast<uLong>(std::min<std::size_t>(data.size(), std::numeric_limits<uLong>::max()))));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  std::size_t in_left = data.size();
  int rc = Z_OK;
  do {
    // zlib counts in uInt: feed inputs over 4 GiB in pieces.
    const uInt chunk = static_cast<uInt>(std::min<std::size_t>(in_left, std::numeric_limits<uInt>::max()));
    z.avail_in = chunk;
    in_left -= chunk;
    do {
      if (z.total_out == out.size()) out.resize(out.size() * 2 + 64);
      z.next_out = reinterpret_cast<Bytef*>(out.data() + z.total_out);
      z.avail_out = static_cast<uInt>(std::min<std::size_t>(out.size() - z.total_out, std::numeric_limits<uInt>::max()));
      rc = deflate(&z, in_left == 0 ? Z_FINISH : Z_NO_FLUSH);
      if (rc == Z_STREAM_ERROR) throw IoError("gzip: zlib deflate failed");
    } while (z.avail_out == 0 || (in_left == 0 && rc != Z_STREAM_END));
  } while (in_left > 0);
  out.resize(z.total_out);
  return out;
}

// The most bytes gzip_decompress gives back unless told otherwise: a small
// file can decompress to a thousand times its size, and a graph file larger
// than this is far beyond any model kiln reads (a 180k-node graph is 35 MB).
inline constexpr std::size_t kDefaultMaxDecompressedBytes = std::size_t(1) << 30;

// Decompresses gzip data (several concatenated members are read as one, as
// gzip(1) does). Throws FormatError naming `source` for corrupt or truncated
// data, and for data that decompresses to more than `max_bytes`.
inline std::string gzip_decompress(std::string_view data, std::string_view source = "<gzip>",
                                   std::size_t max_bytes = kDefaultMaxDecompressedBytes) {
  auto fail = [&](const std::string& what) -> FormatError {
    return FormatError(std::string(source) + ": " + what);
  };
  if (!is_gzip(data)) throw fail("not gzip data (it does not start with the bytes 1f 8b)");
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw IoError(std::string(source) + ": cannot initialise zlib inflate");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, inflateEnd);
  std::string out;
  // The trailer holds the (last member's) size mod 2^32: a good first guess.
  std::size_t guess = data.size() * 4;
  if (data.size() >= 18) {
    const auto* t = reinterpret_cast<const unsigned char*>(data.data() + data.size() - 4);
    const std::size_t isize = t[0] | (t[1] << 8) | (t[2] << 16) | (std::size_t(t[3]) << 24);
    if (isize > guess && isize < data.size() * std::size_t(1100)) guess = isize;  // deflate cannot exceed ~1032:1
  }
  auto over_limit = [&] {
    return fail("decompresses to more than " + std::to_string(max_bytes) +
                " bytes, the limit on decompressed size (a caller can raise it)");
  };
  // `out` never grows past one byte more than the limit: filling that byte means too much.
  const std::size_t cap = max_bytes < std::numeric_limits<std::size_t>::max() ? max_bytes + 1 : max_bytes;
  out.resize(std::min(guess + 1, cap));
  std::size_t in_pos = 0, out_pos = 0;
  for (;;) {
    if (out_pos == out.size()) {
      if (out.size() >= cap) throw over_limit();
      out.resize(std::min(std::max<std::size_t>(out.size(), 1) * 2, cap));
    }
    const uInt in_chunk = static_cast<uInt>(std::min<std::size_t>(data.size() - in_pos, std::numeric_limits<uInt>::max()));
    const uInt out_chunk = static_cast<uInt>(std::min<std::size_t>(out.size() - out_pos, std::numeric_limits<uInt>::max()));
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + in_pos));
    z.avail_in = in_chunk;
    z.next_out = reinterpret_cast<Bytef*>(out.data() + out_pos);
    z.avail_out = out_chunk;
    const int rc = inflate(&z, Z_NO_FLUSH);
    in_pos += in_chunk - z.avail_in;
    out_pos += out_chunk - z.avail_out;
    if (rc == Z_STREAM_END) {
      if (in_pos == data.size()) break;
      // Another member follows (or trailing garbage, which zlib rejects next).
      if (!is_gzip(data.substr(in_pos))) throw fail("unexpected data after the end of the gzip stream");
      inflateReset(&z);
      continue;
    }
    if (rc == Z_DATA_ERROR) throw fail(std::string("corrupt gzip data: ") + (z.msg ? z.msg : "invalid deflate stream"));
    if (rc == Z_MEM_ERROR) throw IoError(std::string(source) + ": out of memory while decompressing");
    if (rc == Z_BUF_ERROR || rc == Z_OK) {
      if (in_pos == data.size() && z.avail_out != 0)
        throw fail("truncated gzip data: the stream ends before its end marker (" + std::to_string(data.size()) +
                   " compressed bytes, " + std::to_string(out_pos) + " bytes decompressed)");
      continue;
    }
    throw fail("zlib inflate error " + std::to_string(rc));
  }
  if (out_pos > max_bytes) throw over_limit();
  out.resize(out_pos);
  return out;
}

// The bytes of `path`, exactly as stored.
inline std::string read_file_bytes(const std::filesystem::path& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) throw IoError(path.string() + ": cannot open for reading: " + std::strerror(errno));
  std::string out;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec) out.resize(static_cast<std::size_t>(size));
  std::size_t got = out.empty() ? 0 : std::fread(out.data(), 1, out.size(), f.get());
  out.resize(got);
  // Read on past the reported size (pipes, files that grow, /proc).
  char buf[1 << 16];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f.get())) > 0;) out.append(buf, n);
  if (std::ferror(f.get())) throw IoError(path.string() + ": read error: " + std::strerror(errno));
  return out;
}

// The contents of `path`, decompressed when the file is gzip (by its magic
// bytes) to at most `max_decompressed` bytes.
inline std::string read_file(const std::filesystem::path& path,
                             std::size_t max_decompressed = kDefaultMaxDecompressedBytes) {
  std::string bytes = read_file_bytes(path);
  if (is_gzip(bytes)) return gzip_decompress(bytes, path.string(), max_decompressed);
  return bytes;
}

// True when `path` names a gzip file by convention (ends in ".gz").
inline bool has_gz_suffix(const std::filesystem::path& path) { return path.extension() == ".gz"; }

// Writes `data` to `path`, replacing it; gzip-compressed when `gzip` is true.
inline void write_file(const std::filesystem::path& path, std::string_view data, bool gzip = false,
                       int gzip_level = Z_DEFAULT_COMPRESSION) {
  std::string compressed;
  if (gzip) {
    compressed = gzip_compress(data, gzip_level);
    data = compressed;
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
  if (!f) throw IoError(path.string() + ": cannot open for writing: " + std::strerror(errno));
  if (std::fwrite(data.data(), 1, data.size(), f.get()) != data.size())
    throw IoError(path.string() + ": write error: " + std::strerror(errno));
  if (std::fclose(f.release()) != 0) throw IoError(path.string() + ": write error on close: " + std::strerror(errno));
}

}  // namespace kiln::io
