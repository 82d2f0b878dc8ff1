// Runs emitted CUDA C on the CPU, so the CUDA path is tested without a GPU.
//
// The source from codegen/cuda is compiled by the host C++ compiler with
// -DKILN_SIM into a shared object (cached by content under the temporary
// directory) and loaded. A launch runs the blocks one after another; the
// threads of a block are fibers with their own stacks and registers, so
// __syncthreads, warp shuffles and mma.sync are real meetings of threads:
// a thread that reaches a barrier waits until every live thread of its
// block (or warp) has arrived. Every global-memory access is checked
// against the launched buffers, and a barrier no thread can pass is
// reported as a deadlock.
//
// What it does not model: timing and occupancy, memory coalescing, shared
// memory bank conflicts, caches, the relaxed ordering of global memory
// between blocks (blocks run one at a time, so atomics never race), and
// divergent warps (each thread runs to its next barrier on its own).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"
#include "ir/interpreter.h"

namespace kiln {

class SimulatedKernel {
 public:
  ~SimulatedKernel();
  // Launches over `grid` blocks; args follow the kernel's parameters (as
  // for the interpreter). Throws kiln::Error on an out-of-bounds access, a
  // deadlock, or a block size over 1024 threads.
  void launch(const Kernel& k, const std::vector<Arg>& args, const Grid& grid) const;
  const CudaSource& source() const { return src_; }

  // Compiles with $KILN_HOST_CXX (default c++); the compiler's output is in
  // the error when it fails.
  static std::shared_ptr<SimulatedKernel> compile(const CudaSource& src);

  // The compiled kernels kept under the temporary directory
  // ($TMPDIR/kiln-cuda-sim-UID, one folder per source), for `kiln cache`.
  static std::string cache_dir();
  struct CacheStats {
    int64_t builds = 0, bytes = 0;
  };
  static CacheStats cache_stats();
  // Removes every kept build; returns how many there were.
  static int64_t clear_cache();

 private:
  SimulatedKernel() = default;
  CudaSource src_;
  void* handle_ = nullptr;
  void (*thread_fn_)(void* const*) = nullptr;
};

}  // namespace kiln
