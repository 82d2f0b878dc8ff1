// The CPU backend: kernels lowered to LLVM IR, compiled by the ORC JIT for
// the host's features, their objects kept in the compile cache, and grids
// run on the thread pool. Buffers are host memory (huge-page backed above
// 2 MiB, runtime/host_memory.h).
#pragma once

#include <memory>

#include "runtime/backend.h"
#include "targets/cpu/cpu_jit.h"

namespace kiln {

std::unique_ptr<Backend> make_cpu_backend(ThreadPool& pool);

// The JIT behind a CPU backend (for `kiln list --compile` and tests); throws
// kiln::Error when `b` is another backend.
CpuJit& cpu_jit(Backend& b);

}  // namespace kiln
