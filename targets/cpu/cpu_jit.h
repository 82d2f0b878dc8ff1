// The CPU JIT: one long-lived LLVM ORC LLJIT for the host, plus the same
// pipeline pointed at any CpuTarget to show LLVM IR and assembly.
//
// compile() lowers a verified kernel (codegen/cpu), runs LLVM's O3 pipeline
// for the host target machine and hands the module to ORC; the returned
// function pointer stays valid for the life of the process. Compilation is
// serialised by a mutex; calling compiled kernels needs no lock.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "codegen/cpu/launch_abi.h"
#include "ir/kernel.h"
#include "targets/cpu/cpu_target.h"

namespace llvm::orc {
class LLJIT;
}

namespace kiln {

struct CompiledCpuKernel {
  KernelRangeFn fn = nullptr;
  std::string symbol;
  double compile_ms = 0;  // lowering + O3 + machine code, wall time
};

class CpuJit {
 public:
  // `profile` overrides what the host supports (tests use it to run the
  // portable masked-memory lowering on an AVX-512 machine).
  explicit CpuJit(std::optional<CpuProfile> profile = std::nullopt);
  ~CpuJit();

  const CpuTarget& target() const { return target_; }

  // `symbol` must be unique within this JIT (callers derive it from the
  // kernel's compile key). compile() = compile_to_object() + load_object().
  CompiledCpuKernel compile(const Kernel& k, const std::string& symbol);
  // Lowering, O3 and machine code for the host: a relocatable ELF object
  // exporting `symbol` (what the compile cache stores).
  std::string compile_to_object(const Kernel& k, const std::string& symbol);
  // Links an object into the JIT without running LLVM's code generator.
  CompiledCpuKernel load_object(const std::string& object, const std::string& symbol);

 private:
  CpuTarget target_;
  CpuProfile profile_;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::mutex mu_;
};

// For `kiln inspect`: the module before or after O3 for target t.
std::string cpu_llvm_ir(const Kernel& k, const CpuTarget& t, bool optimized);
// The assembly LLVM emits for target t after O3.
std::string cpu_assembly(const Kernel& k, const CpuTarget& t);

}  // namespace kiln
