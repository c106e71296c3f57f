// Any bytes given to the .npy reader give a tensor whose byte count matches its
// shape and dtype, or a named error.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kiln/io/npy_weights.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    kiln::io::WeightTensor t = kiln::io::parse_npy(bytes, "<fuzz>");
    if (t.bytes.size() != static_cast<std::size_t>(t.numel()) * t.itemsize()) std::abort();
  } catch (const kiln::Error&) {
  }
  return 0;
}
