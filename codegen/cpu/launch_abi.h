// The calling convention between compiled CPU kernels and the runtime.
//
// A compiled kernel exports one function that runs a contiguous range of
// linearised program ids (axis 0 fastest), so the thread pool hands each
// worker one call per shard instead of one call per program instance.
// Scalar parameters travel in 8-byte slots: integers and bool as int64,
// floats as the bits of a double (the kernel narrows them to its dtype).
#pragma once

#include <cstdint>

namespace kiln {

struct CpuKernelArgs {
  void* const* buffers;    // one pointer per buffer parameter, in order
  const int64_t* scalars;  // one slot per scalar parameter, in order
  int32_t grid[3];
};

using KernelRangeFn = void (*)(const CpuKernelArgs* args, int64_t begin, int64_t end);

}  // namespace kiln
