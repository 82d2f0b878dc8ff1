#include "runtime/host_memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "ir/error.h"

namespace kiln {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}

void HostMemory::Free::operator()(uint8_t* p) const { std::free(p); }

HostMemory::HostMemory(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  size_t align = bytes >= kHugePage ? kHugePage : 64;
  size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (!p) throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
  if (align == kHugePage) madvise(p, rounded, MADV_HUGEPAGE);  // a hint; failure is harmless
  std::memset(p, 0, rounded);
  ptr_.reset(static_cast<uint8_t*>(p));
}

}  // namespace kiln
