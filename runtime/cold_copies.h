// Copies of a launch's large buffers, for timing a kernel in the regime a
// model forward runs it in.
//
// A forward streams hundreds of MB of weights per token, so every matrix
// and the KV cache reach a kernel from DRAM. A benchmark or tuner that
// re-runs one launch on the same buffers measures the cache instead when
// they fit it, and ranks candidates for the wrong machine: a prefetch
// that hides DRAM latency only costs on a warm cache. Cycling the launch
// through enough copies of its large buffers keeps each launch's reads
// cold, as in a forward; small buffers (activations, just written by the
// previous kernel) stay shared and warm.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/kernel.h"
#include "runtime/host_memory.h"
#include "runtime/named_args.h"

namespace kiln {

// Buffers this large or more are copied: weights and caches, not the
// activations of a decode step.
inline constexpr int64_t kColdBufferBytes = int64_t{1} << 20;
// Copies are made until all of them total this much, far over any
// last-level cache.
inline constexpr int64_t kColdTotalBytes = int64_t{256} << 20;

class ColdCopies {
 public:
  // The original arguments alone: every launch reuses them (warm).
  explicit ColdCopies(const BoundArgs& args) : args_{args} {}
  // Copies of k's buffer arguments of `large` bytes or more, and of its
  // largest however small (a GEMV's weights: a 2048x768 Q4_K matrix is
  // 0.9 MB, and re-read from cache it ran at 2.5x the probe), with their
  // current contents, until all sets of them total `total` bytes.
  ColdCopies(const Kernel& k, const BoundArgs& args, int64_t large = kColdBufferBytes,
             int64_t total = kColdTotalBytes);

  // The arguments of the next launch, cycling through the copies.
  const BoundArgs& next();
  size_t count() const { return args_.size(); }

 private:
  std::vector<HostMemory> memory_;
  std::vector<BoundArgs> args_;
  size_t next_ = 0;
};

}  // namespace kiln
