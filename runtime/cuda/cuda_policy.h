// The GPU's kernel policy (runtime/kernel_policy.h), shared by the cuda
// backend and cuda-sim (which runs the same CUDA C on the CPU, so the GPU's
// choices are tested without a GPU).
//
// Quantized weights stay as ggml stores them: one copy in device memory,
// each row's blocks contiguous, which a warp reads with coalesced loads. The
// CPU's 16-row interleave exists for a 16-lane VNNI register and would add a
// second copy of every matrix to the upload. Attention over f16, bf16 and
// q8_0 caches runs as tile dots (mma.sync), not the CPU's key walk.
//
// The policy also sizes each program's thread block: the CUDA code
// generator spreads every tile of a program over the block's threads, so a
// thread holds about tile elements / threads registers per live tile.
#pragma once

#include "codegen/cuda/cuda_codegen.h"
#include "ir/kernel.h"
#include "runtime/kernel_policy.h"

namespace kiln {

// The policy for a GPU of compute capability sm (x10; cuda-sim is sm_80).
// Before sm_80 there is no mma.sync, so attention keeps the walk (FMAs);
// the backend says so once when it starts.
const KernelPolicy& cuda_kernel_policy(int sm);

// Warps per thread block for k: 4, or 8 when a tile of k has more than 16
// elements per thread of 4 warps (attention at head size 256: a [16, 256]
// accumulator, which spills at 4 warps and not at 8). Never more than 8, so
// 255 registers per thread still fit a block's 64K registers.
int cuda_program_warps(const Kernel& k);

}  // namespace kiln
