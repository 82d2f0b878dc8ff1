// What the backends whose buffers are host memory (cpu, cuda-sim) share:
// allocation from a HostHeap (huge-page backed above 2 MiB) and copies that
// are plain memcpy.
#pragma once

#include <cstring>

#include "runtime/backend.h"
#include "runtime/host_memory.h"

namespace kiln {

class HostMemoryBackend : public Backend {
 public:
  bool host_visible() const override { return true; }
  void* alloc(size_t bytes) override { return heap_.alloc(bytes); }
  void commit(void* p, size_t bytes) override { HostHeap::commit(p, bytes); }
  void free(void* p) override { heap_.free(p); }
  void upload(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }

 private:
  HostHeap heap_;
};

}  // namespace kiln
