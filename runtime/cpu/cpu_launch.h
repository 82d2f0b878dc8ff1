// Runs a JIT-compiled kernel over a grid on the thread pool: the CPU
// backend's launch.
//
// The lowest launch layer: it checks the arguments against the kernel's
// parameters (count and kinds) and packs them into the CpuKernelArgs ABI.
// Buffer sizes are checked one level up, where the kernel's definition says
// how large each buffer must be (Runtime::check_launch).
#pragma once

#include <string>
#include <vector>

#include "codegen/cpu/launch_abi.h"
#include "ir/interpreter.h"
#include "ir/kernel.h"
#include "runtime/backend.h"
#include "targets/cpu/thread_pool.h"

namespace kiln {

// A launch whose buffers need fewer bytes than this runs on the calling
// thread: waking a worker and waiting for its chunk costs more than the
// work (decode's norms, residual adds and activation quantisation touch a
// few KiB and took 2-4 us more on 2 threads than on one).
constexpr int64_t kSerialLaunchBytes = 128 << 10;

// A launch's arguments packed into the CpuKernelArgs ABI once, so that a plan
// replays it without re-checking or re-packing (only its dynamic scalars
// are patched, through set_scalar).
class CpuLaunch : public BoundLaunch {
 public:
  // Throws kiln::Error naming the kernel on a bad argument or grid.
  // `bytes`: what the launch's buffers need (Runtime::check_launch), or -1
  // when unknown (always spread over the pool).
  CpuLaunch(const Kernel& k, KernelRangeFn fn, const std::vector<Arg>& args, const Grid& grid,
            ThreadPool& pool, int64_t bytes = -1);
  CpuLaunch(const CpuLaunch&) = delete;
  CpuLaunch& operator=(const CpuLaunch&) = delete;

  void set_scalar(size_t index, int64_t v) override;
  void run() override;

 private:
  KernelRangeFn fn_;
  ThreadPool& pool_;
  std::string name_;
  std::vector<void*> buffers_;
  std::vector<int64_t> scalars_;
  std::vector<std::pair<int, bool>> slot_;  // per argument: scalar slot (-1: buffer), is float
  CpuKernelArgs la_;
  int64_t programs_;
  bool serial_;
};

void launch_cpu(const Kernel& k, KernelRangeFn fn, const std::vector<Arg>& args, const Grid& grid,
                ThreadPool& pool, int64_t bytes = -1);

}  // namespace kiln
