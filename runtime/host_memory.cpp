#include "runtime/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ir/error.h"

namespace kiln {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;

[[noreturn]] void out_of_memory(size_t bytes) {
  throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
}
}  // namespace

void HostMemory::Free::operator()(uint8_t* p) const {
  if (mapped)
    munmap(p, mapped);
  else
    std::free(p);
}

HostMemory::HostMemory(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  if (bytes < kHugePage) {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) out_of_memory(bytes);
    std::memset(p, 0, bytes);
    ptr_.reset(static_cast<uint8_t*>(p));
    return;
  }
  // Large buffers are mapped anonymously: the kernel hands out zeroed pages
  // on first touch, so the zero fill costs nothing up front and the pages
  // are faulted in by whichever threads first write them (in parallel, for
  // the weights' interleaved copies). Mapped with a huge page to spare, then
  // trimmed to a 2 MiB-aligned range so that it can be backed by huge pages.
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* raw = mmap(nullptr, rounded + kHugePage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) out_of_memory(bytes);
  auto* base = static_cast<uint8_t*>(raw);
  auto* start = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base) + kHugePage - 1) /
                                           kHugePage * kHugePage);
  const size_t head = static_cast<size_t>(start - base), tail = kHugePage - head;
  if (head) munmap(base, head);
  if (tail) munmap(start + rounded, tail);
  madvise(start, rounded, MADV_HUGEPAGE);  // a hint; failure is harmless
  ptr_ = std::unique_ptr<uint8_t, Free>(start, Free{rounded});
}

void* HostHeap::alloc(size_t bytes) {
  HostMemory m(bytes);
  void* p = m.data();
  std::lock_guard<std::mutex> lock(mu_);
  blocks_.emplace(p, std::move(m));
  return p;
}

void HostHeap::commit(void* p, size_t bytes) {
  if (bytes == 0) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0) return;
  if (errno == ENOMEM || errno == EFAULT)
    throw Error("out of host memory committing " + std::to_string(bytes) + " bytes");
  // Kernels before Linux 5.14 lack MADV_POPULATE_WRITE: touch each page
  // (its contents are zero, or already written).
  auto* bytes_at = static_cast<volatile uint8_t*>(p);
  for (uintptr_t a = reinterpret_cast<uintptr_t>(p); a < end; a = (a / page + 1) * page) {
    const size_t i = a - reinterpret_cast<uintptr_t>(p);
    bytes_at[i] = bytes_at[i];
  }
}

void HostHeap::free(void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  blocks_.erase(p);
}

}  // namespace kiln
