#pragma once
// Op packets: every overload of one op, as PyTorch's OpOverloadPacket
// (`torch.ops.aten.addmm`) stands for aten.addmm.default, aten.addmm.out, ...
//
//   kiln::packet(kiln::aten::addmm)   // from any overload: "aten.addmm"
//   kiln::packet("aten.addmm")        // by name
//
// A call pattern given a packet among its targets matches a node whose target
// is the packet itself or any overload of it, including overloads the program
// never declared (read from a file). Membership is decided from the target's
// name (op_packet_name), so it needs no list of overloads.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kiln/core/op_ref.hpp"

namespace kiln {

struct OpPacket {
  std::string_view name;  // "aten.addmm"
  std::uint64_t hash = 0;  // hash_op_name(name)
};

// The packet named `name`: an overload name ("aten.addmm.default") stands for
// its packet, anything else ("aten.addmm") is the packet's own name.
constexpr OpPacket packet(std::string_view name) {
  const std::string_view p = op_packet_name(name);
  const std::string_view n = p.empty() ? name : p;
  return OpPacket{n, hash_op_name(n)};
}
constexpr OpPacket packet(OpRef overload) { return packet(overload.name); }

// The packet hash of the op with hash `target` (0: no overload, or a hash the
// registry has not interned), from the op's name in the OpRegistry (a graph
// interns every target it holds), remembered per thread: a pattern with a
// packet asks it for every node it is tried at, and the registry takes a lock.
// (Worked out here rather than stored by OpRegistry::intern, which every node
// creation inlines: a bigger intern made GCC stop inlining pattern code.)
[[gnu::noinline]] inline std::uint64_t packet_of(std::uint64_t target) {
  struct Memo {
    std::uint64_t target = 0;
    std::uint64_t packet = 0;
  };
  thread_local std::array<Memo, 256> memo{};
  Memo& m = memo[(target * 0x9E3779B97F4A7C15ull) >> 56];
  if (m.target == target && target != 0) return m.packet;
  // A target the registry has not seen yet is not remembered, so that
  // interning it later is seen (a name's packet never changes once known).
  const std::optional<std::string_view> name = OpRegistry::instance().name_of(target);
  if (!name) return 0;
  const std::string_view p = op_packet_name(*name);
  m = Memo{target, p.empty() ? 0 : hash_op_name(p)};
  return m.packet;
}

}  // namespace kiln
