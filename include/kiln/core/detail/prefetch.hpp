#pragma once
// detail::prefetch: a cache-line prefetch that the compiler keeps.
namespace kiln::detail {

// __builtin_prefetch that GCC keeps (bench/README.md): to GCC a prefetch-only function is
// pure, and an un-inlined call to it is deleted; the empty volatile asm is an effect it must keep.
template <int ForWrite = 0>
inline void prefetch(const void* p) {
  __builtin_prefetch(p, ForWrite);
  asm volatile("");
}

}  // namespace kiln::detail
