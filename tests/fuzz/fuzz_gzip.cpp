// Any bytes given to gzip_decompress (with a small limit, as a caller reading
// untrusted files would set) decompress or give a named error.
#include <cstdint>
#include <string_view>

#include "kiln/io/gzip.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    (void)kiln::io::gzip_decompress(bytes, "<fuzz>", std::size_t(1) << 24);
  } catch (const kiln::Error&) {
  }
  return 0;
}
