// The memory-bandwidth roofline every kernel benchmark is compared with:
// a plain parallel read of a buffer far larger than the caches, on the same
// thread pool and shard layout the kernels use.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/host_memory.h"
#include "targets/cpu/thread_pool.h"

namespace kiln {

class BandwidthProbe {
 public:
  explicit BandwidthProbe(int64_t bytes = int64_t{512} << 20);
  // One full read; returns a checksum so the compiler cannot drop it.
  uint64_t read_once(ThreadPool& pool) const;
  // Best GB/s of `reps` full reads.
  double measure_gbps(ThreadPool& pool, int reps = 5) const;
  int64_t bytes() const { return static_cast<int64_t>(mem_.size()); }

 private:
  HostMemory mem_;
};

}  // namespace kiln
