// Buffers at a fixed 64-byte alignment, whatever the heap looks like.
//
// Vectorised reductions (Eigen's redux, dot products, softmax sums) peel scalar elements
// until the first aligned address, then add whole packets: the order of the additions, and
// so the last bits of a sum, follow where the buffer starts. malloc gives 16 bytes, and a
// large block lands wherever the heap's state puts it, so the same input could give
// different bits in two processes. Every trace tensor and kernel buffer is allocated here
// at 64 bytes (an AVX-512 packet, a cache line), and Eigen's own storage is fixed to 64 by
// EIGEN_MAX_ALIGN_BYTES=64 (core/CMakeLists.txt), so the sums are the same in any process.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace attnviz {

constexpr std::size_t kBufferAlign = 64;  // bytes

template <class T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() noexcept = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kBufferAlign}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kBufferAlign}); }
  template <class U>
  bool operator==(const AlignedAllocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const AlignedAllocator<U>&) const noexcept { return false; }
};

// A float buffer starting on a 64-byte boundary: Tensor's storage and the kernels' scratch.
using FloatBuf = std::vector<float, AlignedAllocator<float>>;

}  // namespace attnviz
