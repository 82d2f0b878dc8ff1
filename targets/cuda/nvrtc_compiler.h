// CUDA C -> PTX (and a cubin for one GPU) through NVRTC, and PTX -> SASS
// checks through ptxas.
//
// Both come from the CUDA toolkit, found at run time ($KILN_CUDA_HOME,
// $CUDA_HOME, else /usr/local/cuda): NVRTC is loaded with dlopen and ptxas
// is run as a program, so Kiln builds and runs without the toolkit and only
// these calls report that it is missing. The include path is set so the
// prelude's cuda_fp16.h / cuda_bf16.h / cuda_fp8.h resolve; -fmad=false
// keeps a*b+c as two rounded ops, as the IR defines them.
#pragma once

#include <cstdint>
#include <string>

#include "codegen/cuda/cuda_codegen.h"

namespace kiln {

// The toolkit directory, or "" with *why saying what was looked for.
std::string find_cuda_toolkit(std::string* why = nullptr);

// "13.0": NVRTC's version (throws when NVRTC cannot be loaded).
std::string nvrtc_version();

// What NVRTC made of one CUDA source.
struct CudaModule {
  std::string ptx;
  std::string arch;  // "sm_80"
  // Machine code for `arch` (compile_cubin), which the driver loads as it
  // is; empty for PTX alone, which the driver compiles again in every
  // process that loads it (seconds for a large kernel).
  std::string cubin;
  double compile_ms = 0;
};

// Compiles for compute_<src.sm>. Throws kiln::Error with NVRTC's log and
// the path the source was written to when the compile fails. Safe to call
// from several threads at once (each call is its own NVRTC program), as are
// compile_cubin and run_ptxas.
CudaModule compile_ptx(const CudaSource& src);

// Compiles for the GPU sm_<sm> (sm >= src.sm): the PTX and the cubin.
CudaModule compile_cubin(const CudaSource& src, int sm);

// What ptxas reports for one kernel at one arch.
struct PtxasReport {
  int registers = 0;
  int64_t shared_bytes = 0;  // static shared memory (Kiln uses dynamic)
  int64_t stack_bytes = 0;
  int64_t spill_store_bytes = 0, spill_load_bytes = 0;
  std::string text;  // ptxas -v output
};

// Assembles the PTX for sm_XX; throws with ptxas' output when it rejects it.
PtxasReport run_ptxas(const CudaModule& m, int sm);

}  // namespace kiln
