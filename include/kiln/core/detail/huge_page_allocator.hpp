#pragma once
// Whole 2 MiB pages that Linux is asked to back with huge pages
// (allocate_huge_pages), and `detail::HugePageAllocator<T>`: a std::allocator
// that puts blocks of 2 MiB and more in them.
// A pass's per-node tables of a large graph (hundreds of thousands of nodes)
// are made fresh for each run of the pass; with 4 KiB pages each costs a
// page fault per 4 KiB when first written (about as much as the walk that
// fills it), and random reads into it miss the TLB.
#include <cstddef>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kiln::detail {

inline constexpr std::size_t kHugePage = std::size_t(2) << 20;

// `bytes` rounded up to whole 2 MiB pages, aligned to one, which Linux is
// asked to back with huge pages; free with free_huge_pages.
inline void* allocate_huge_pages(std::size_t bytes) {
  const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = ::operator new(rounded, std::align_val_t{kHugePage});
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  ::madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
}
inline void free_huge_pages(void* p) noexcept { ::operator delete(p, std::align_val_t{kHugePage}); }

template <class T>
struct HugePageAllocator {
  using value_type = T;

  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) return static_cast<T*>(::operator new(bytes, std::align_val_t{alignof(T)}));
    return static_cast<T*>(allocate_huge_pages(bytes));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < kHugePage) ::operator delete(p, std::align_val_t{alignof(T)});
    else free_huge_pages(p);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace kiln::detail
