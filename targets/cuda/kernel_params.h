// The arguments of a CUDA launch as cuLaunchKernel takes them, shared by
// the driver and the simulator so both pass values identically.
//
// One 8-byte slot per parameter holds its value (a buffer's address, a
// float scalar as f32, an integer normalised to its dtype and read through
// its low bytes on this little-endian machine), and `ptrs` points at each
// slot.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ir/interpreter.h"
#include "ir/kernel.h"

namespace kiln {

struct KernelParams {
  std::vector<uint64_t> slots;
  std::vector<void*> ptrs;
};

// `address(i)` gives buffer parameter i's address (host or device). Throws
// kiln::Error naming the kernel when the argument count is wrong.
KernelParams pack_kernel_params(const Kernel& k, const std::vector<Arg>& args,
                                const std::function<uint64_t(size_t)>& address);

}  // namespace kiln
