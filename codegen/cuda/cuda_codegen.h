// IR -> CUDA C: one verified Kernel becomes one CUDA translation unit.
//
// A program instance is a thread block of `num_warps * 32` threads. A tile
// of N elements is spread cyclically over the block (thread t owns flat
// elements t, t+T, t+2T, ...), so elementwise ops, loads and stores are
// per-thread register arrays and consecutive threads touch consecutive
// addresses. Scalars are held by every thread. Ops that move elements
// between threads (broadcasts, slices, transposes, width-changing bitcasts,
// reductions, dot) stage tiles in shared memory; reductions combine with
// warp shuffles; `dot` on f16/bf16 tiles uses mma.sync on sm_80+; a
// Lookup's table is a constant array at file scope. The source includes
// "kiln_cuda.cuh" (the prelude), which NVRTC and the simulator resolve
// from `cuda_prelude()`. It knows nothing of NVRTC or drivers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/interpreter.h"
#include "ir/kernel.h"
#include "ir/spec.h"

namespace kiln {

// The first arch with mma.sync for f16/bf16 and int8 tiles (`dot` lowers to
// FMAs before it).
constexpr int kCudaMmaSm = 80;

struct CudaOptions {
  int num_warps = 4;
  int sm = 80;  // compute capability x10; mma.sync needs kCudaMmaSm or more
};

// What kernels may assume of an NVIDIA GPU: 32-thread warps of 32-bit
// lanes, up to 255 registers per thread.
inline TargetDesc cuda_target_desc() { return {32 * 32, 255, 32}; }

struct CudaSource {
  std::string code;          // the translation unit
  int sm = 80;               // the arch it was generated for
  std::string entry;         // extern "C" __global__ function
  int threads = 0;           // per block
  int64_t shared_bytes = 0;  // dynamic shared memory per block
  // Where the kernel's scratch arrays lie in it (the simulator checks
  // accesses against them).
  struct ScratchRange {
    std::string name;
    int64_t offset = 0, bytes = 0;
  };
  std::vector<ScratchRange> scratch;
  bool uses_mma = false;
};

// Throws kiln::Error naming the kernel and the op when the CUDA lowering
// does not support it (e.g. an atomic on a narrow float), and when the
// kernel needs more shared memory than the arch allows.
CudaSource emit_cuda(const Kernel& k, const CudaOptions& options = {});

// Per-block limits of the arch: threads, and dynamic shared memory with
// the opt-in attribute (163 KiB on sm_80, 227 KiB on sm_90).
constexpr int kCudaMaxThreads = 1024;
int64_t cuda_max_shared_bytes(int sm);

// Throws kiln::Error with the limit when `src` asks for more than its arch
// gives a block.
void check_cuda_limits(const CudaSource& src);
// Throws kiln::Error naming the kernel, the registers and the limit when
// src.threads threads of `registers` registers each do not fit one block's
// register file (64K 32-bit registers from sm_80 to sm_90, allocated per
// warp in units of 256): such a launch would fail in the driver with "too
// many resources requested". The CUDA device checks it when it loads a
// kernel; `kiln inspect --model` with ptxas' count.
constexpr int64_t kCudaBlockRegisters = 65536;
void check_cuda_registers(const CudaSource& src, int registers);
// check_cuda_limits plus the grid's limits (2^31-1 blocks on x, 65535 on y
// and z); launchers call it before every launch.
void check_cuda_launch(const CudaSource& src, const Grid& grid);

// The prelude's text (codegen/cuda/kiln_cuda.cuh) and the simulator ABI
// header it includes under KILN_SIM (codegen/cuda/sim_abi.h).
std::string_view cuda_prelude();
std::string_view cuda_sim_abi();

}  // namespace kiln
