// Page-aligned host memory for kernel buffers.
//
// Weights and activations are streamed once per token, so TLB misses on 4 KiB
// pages cost real bandwidth on buffers of hundreds of MiB. Allocations of
// 2 MiB and more are 2 MiB-aligned and advised as transparent huge pages
// (where the kernel allows it; otherwise they are ordinary pages). They are
// mapped, not filled: their pages are zero when first touched, by whichever
// thread touches them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace kiln {

class HostMemory {
 public:
  HostMemory() = default;
  explicit HostMemory(size_t bytes);  // zero-filled; throws kiln::Error when out of memory
  HostMemory(HostMemory&&) noexcept = default;
  HostMemory& operator=(HostMemory&&) noexcept = default;

  uint8_t* data() { return ptr_.get(); }
  const uint8_t* data() const { return ptr_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    size_t mapped;  // bytes mapped with mmap, else 0 (aligned_alloc; value-initialised)
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> ptr_;
  size_t size_ = 0;
};

// The host-memory backends' allocations (cpu, cuda-sim): HostMemory blocks
// by address, freed by address.
class HostHeap {
 public:
  void* alloc(size_t bytes);
  // Faults in the pages of [p, p + bytes) (Backend::commit).
  static void commit(void* p, size_t bytes);
  void free(void* p);

 private:
  std::mutex mu_;
  std::map<void*, HostMemory> blocks_;
};

}  // namespace kiln
