// Compiles library kernels on first use and launches them on the CPU.
//
// A launch names a Spec (kernel + dtypes + constexprs, see
// KernelDef::make_spec), passes arguments in parameter order and, where the
// grid depends on sizes the kernel does not take as parameters (rows of a
// softmax), those sizes by name. Before any code runs the launch is checked:
// argument count and kinds, every buffer at least as large as the launch
// needs. Compiled kernels are kept in memory for the life of the Runtime.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ir/interpreter.h"
#include "kernels/registry.h"
#include "targets/cpu/cpu_jit.h"
#include "targets/cpu/thread_pool.h"

namespace kiln {

using Sizes = std::map<std::string, int64_t>;

struct CompiledKernel {
  Spec spec;
  Kernel kernel;  // after the pass pipeline
  CompiledCpuKernel cpu;
};

class Runtime {
 public:
  explicit Runtime(int threads = 0);
  ~Runtime();

  int threads() const { return pool_.size(); }
  CpuJit& jit() { return *jit_; }
  ThreadPool& pool() { return pool_; }

  // Builds, optimises and JIT-compiles on first use; later calls are lookups.
  const CompiledKernel& compile(const Spec& spec);

  void launch(const Spec& spec, const std::vector<Arg>& args, const Sizes& sizes = {});
  // The same launch through the reference interpreter.
  void interpret(const Spec& spec, const std::vector<Arg>& args, const Sizes& sizes = {});

 private:
  Grid check_launch(const Spec& spec, const Kernel& k, const std::vector<Arg>& args,
                    const Sizes& sizes);

  ThreadPool pool_;
  std::unique_ptr<CpuJit> jit_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<CompiledKernel>> compiled_;
};

// Builds the kernel of a spec and runs the pass pipeline (shared by the
// runtime, `kiln inspect` and tests).
Kernel build_kernel(const Spec& spec);

}  // namespace kiln
