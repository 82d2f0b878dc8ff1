// Runs a JIT-compiled kernel over a grid on the thread pool.
//
// The lowest launch layer: it checks the arguments against the kernel's
// parameters (count and kinds) and packs them into the LaunchArgs ABI.
// Buffer sizes are checked one level up, where the kernel's definition says
// how large each buffer must be (Runtime::launch).
#pragma once

#include <vector>

#include "codegen/cpu/launch_abi.h"
#include "ir/interpreter.h"
#include "ir/kernel.h"
#include "targets/cpu/thread_pool.h"

namespace kiln {

// Throws kiln::Error naming the kernel and the offending argument.
void check_arg_kinds(const Kernel& k, const std::vector<Arg>& args);

// A launch whose buffers need fewer bytes than this runs on the calling
// thread: waking a worker and waiting for its chunk costs more than the
// work (decode's norms, residual adds and activation quantisation touch a
// few KiB and took 2-4 us more on 2 threads than on one).
constexpr int64_t kSerialLaunchBytes = 128 << 10;

// `bytes`: what the launch's buffers need (Runtime::check_launch), or -1
// when unknown (always spread over the pool).
void launch_cpu(const Kernel& k, KernelRangeFn fn, const std::vector<Arg>& args, const Grid& grid,
                ThreadPool& pool, int64_t bytes = -1);

}  // namespace kiln
