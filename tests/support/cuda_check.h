// Runs a kernel through the reference interpreter and through its CUDA C (in
// the CPU simulator, or on a GPU) on copies of the same buffers, and
// compares every buffer afterwards: integers exactly, floats within
// atol + rtol * |ref|.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"
#include "ir/interpreter.h"
#include "runtime/launch_check.h"
#include "targets/cuda/cuda_simulator.h"

namespace kiln::test {

struct CudaCheck {
  double rtol = 1e-5, atol = 1e-6;
  CudaOptions options = {};
};

// Runs the CUDA C of `src` for kernel k on the buffers of `args`.
using CudaRunner = std::function<void(const Kernel& k, const CudaSource& src,
                                      const std::vector<Arg>& args, const Grid& grid)>;

inline void run_in_simulator(const Kernel& k, const CudaSource& src, const std::vector<Arg>& args,
                             const Grid& grid) {
  SimulatedKernel::compile(src)->launch(k, args, grid);
}

// Returns a description of the first mismatch, or "" when all buffers agree
// (runtime/launch_check.h's comparison). The CUDA C runs on copies, so the
// caller's buffers stay the inputs.
inline std::string cuda_vs_interpreter(const Kernel& k, const std::vector<Arg>& args,
                                       const Grid& grid, const CudaCheck& c = {},
                                       const CudaRunner& run = run_in_simulator) {
  std::vector<std::vector<char>> mem;
  std::vector<Arg> cuda_args = args;
  mem.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_buffer) continue;
    const char* src = static_cast<const char*>(args[i].data);
    mem.emplace_back(src, src + args[i].count * dtype_bytes(k.params[i].dtype));
    cuda_args[i].data = mem.back().data();
  }
  return check_against_interpreter(k, cuda_args, grid, {c.rtol, c.atol},
                                   [&] { run(k, emit_cuda(k, c.options), cuda_args, grid); });
}

}  // namespace kiln::test
