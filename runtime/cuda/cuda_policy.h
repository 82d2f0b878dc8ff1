// The GPU's kernel policy (runtime/kernel_policy.h), shared by the cuda
// backend and cuda-sim (which runs the same CUDA C on the CPU, so the GPU's
// choices are tested without a GPU).
//
// Quantized weights stay as ggml stores them: one copy in device memory,
// each row's blocks contiguous, which a warp reads with coalesced loads. The
// CPU's 16-row interleave exists for a 16-lane VNNI register and would add a
// second copy of every matrix to the upload. Prompt attention over f16 and
// bf16 caches runs as tile dots (mma.sync), not the CPU's key walk.
#pragma once

#include "runtime/kernel_policy.h"

namespace kiln {

const KernelPolicy& cuda_kernel_policy();

}  // namespace kiln
