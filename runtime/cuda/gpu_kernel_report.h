// What a set of kernels costs on a GPU, found without one: each spec built
// as the cuda backend builds it (its warps per block, cuda_policy.h),
// rendered to CUDA C, compiled by NVRTC to a cubin for one arch as a first
// `kiln run --device cuda` compiles it, and assembled by ptxas for its
// registers, spills and shared memory. `kiln inspect --model` prints it
// for a model's plans; a test holds every kernel the cuda policy runs to no
// spills.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/spec.h"
#include "targets/cuda/nvrtc_compiler.h"

namespace kiln {

struct GpuKernelReport {
  Spec spec;
  int64_t launches = 0;  // the caller's count (kiln inspect: in the plans inspected)
  size_t cuda_bytes = 0;
  double nvrtc_ms = 0;
  PtxasReport ptxas;
  int64_t shared_bytes = 0;  // dynamic, per block
  int threads = 0;           // per block
  bool mma = false;
  std::string error;  // why the kernel could not be built or compiled, else ""

  int64_t spill_bytes() const { return ptxas.spill_store_bytes + ptxas.spill_load_bytes; }
};

// Fills every report's fields from its spec for GPU arch sm_<sm>, the
// kernels compiled on `threads` threads at once (as the backend compiles a
// plan). A kernel that fails keeps its error; returns the wall time in ms.
double compile_gpu_reports(std::vector<GpuKernelReport>& reports, int sm, unsigned threads);

}  // namespace kiln
