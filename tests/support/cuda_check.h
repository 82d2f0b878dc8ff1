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
#include "ir/scalar_eval.h"
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

// Returns a description of the first mismatch, or "" when all buffers agree.
inline std::string cuda_vs_interpreter(const Kernel& k, const std::vector<Arg>& args,
                                       const Grid& grid, const CudaCheck& c = {},
                                       const CudaRunner& run = run_in_simulator) {
  std::vector<std::vector<char>> ref_mem, sim_mem;
  std::vector<Arg> ref_args = args, sim_args = args;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_buffer) continue;
    size_t bytes = static_cast<size_t>(args[i].count * dtype_bytes(k.params[i].dtype));
    const char* src = static_cast<const char*>(args[i].data);
    ref_mem.emplace_back(src, src + bytes);
    sim_mem.emplace_back(src, src + bytes);
    ref_args[i].data = ref_mem.back().data();
    sim_args[i].data = sim_mem.back().data();
  }
  interpret(k, ref_args, grid);
  run(k, emit_cuda(k, c.options), sim_args, grid);
  for (size_t i = 0, b = 0; i < args.size(); ++i) {
    if (!args[i].is_buffer) continue;
    DType t = k.params[i].dtype;
    for (int64_t j = 0; j < args[i].count; ++j) {
      ScalarValue r = load_element(ref_mem[b].data(), j, t);
      ScalarValue s = load_element(sim_mem[b].data(), j, t);
      bool ok = is_float(t) ? (std::isnan(r.f) && std::isnan(s.f)) || r.f == s.f ||
                                  std::fabs(r.f - s.f) <= c.atol + c.rtol * std::fabs(r.f)
                            : r.i == s.i;
      if (!ok)
        return "kernel '" + k.name + "', buffer '" + k.params[i].name + "'[" + std::to_string(j) +
               "]: cuda " + (is_float(t) ? std::to_string(s.f) : std::to_string(s.i)) +
               ", interpreter " + (is_float(t) ? std::to_string(r.f) : std::to_string(r.i));
    }
    ++b;
  }
  return "";
}

}  // namespace kiln::test
