// The code Kiln generates for a kernel, as text: its IR before and after the
// passes, the LLVM module and assembly for any CPU target, the CUDA C and
// the PTX for a GPU arch. One place for `kiln inspect`, the library API
// (runtime/kiln.h) and the Python package, so all three print the same.
#pragma once

#include <map>
#include <string>

#include "codegen/cuda/cuda_codegen.h"
#include "ir/spec.h"

namespace kiln {

enum class CodeForm {
  ir_built,     // the IR as the DSL built it
  ir,           // after the pass pipeline
  llvm_before,  // the LLVM module as lowered
  llvm,         // after O3
  assembly,
  cuda,  // CUDA C
  ptx,   // from NVRTC (throws where NVRTC is not installed)
};

// "ir", "ir-before", "llvm", "llvm-before", "asm", "cuda", "ptx"; throws
// kiln::Error naming the accepted spellings.
CodeForm parse_code_form(const std::string& name);

// Where the code is for: "host" (this CPU), "x86-64-v3", "x86-64-v4",
// "aarch64", or "cuda" with an arch.
struct CodeTarget {
  std::string name = "host";
  int sm = 80;        // CUDA only: compute capability x10 (80, 86, 89, 90)
  int num_warps = 0;  // CUDA only: 0 picks the kernel's own (cuda_policy.h)
};

// "sm_80", "sm_86", "sm_89" or "sm_90" as its compute capability x10;
// throws kiln::Error naming the known archs.
int parse_cuda_arch(const std::string& arch);

// The descriptor kernels built for `target` assume (Spec::target).
TargetDesc code_target_desc(const CodeTarget& target);
// The spec of a kernel for a target: the defaults, heuristic, then these.
Spec code_spec(const std::string& kernel, const std::map<std::string, DType>& dtypes,
               const std::map<std::string, int64_t>& constexprs, const CodeTarget& target);

// The code of `form` for `spec` on `target` (CPU forms for CPU targets, CUDA
// forms for "cuda"; the IR for either). Throws kiln::Error naming what does
// not fit (an unknown target or arch, a CUDA form for a CPU target).
std::string generated_code(const Spec& spec, CodeForm form, const CodeTarget& target = {});
// The CUDA C of `spec` for a "cuda" target, with its launch geometry
// (threads, shared memory, tensor cores): what `kiln inspect --resources`
// reports on.
CudaSource cuda_source(const Spec& spec, const CodeTarget& target);

}  // namespace kiln
