// NVRTC's output through the compile cache: NVRTC runs once per CUDA source
// and arch. A backend on a GPU keeps the cubin for that GPU, so a later
// process loads machine code instead of having the driver compile the PTX
// again (seconds per large kernel); `kiln inspect` keeps the PTX.
//
// The key hashes the CUDA C, the prelude, the arch, what is kept and
// cuda_codegen_version() (NVRTC's version, Kiln's version and the
// fingerprint of the CUDA code generator's sources), so a changed lowering
// or toolkit never reuses a stale entry, and a changed CPU lowering never
// invalidates it.
#pragma once

#include <string>

#include "runtime/compile_cache.h"
#include "targets/cuda/nvrtc_compiler.h"

namespace kiln {

struct CachedModule {
  CudaModule module;
  bool from_cache = false;
};

// The PTX for src.sm; with gpu_sm, the cubin for that GPU (a hit holds the
// cubin alone).
CachedModule cached_module(CompileCache& cache, const CudaSource& src, int gpu_sm = 0);

// "kiln 0.1.0+<CUDA codegen fingerprint>": what a CUDA program's key names
// of Kiln (the toolchain is added by each CUDA backend).
std::string cuda_codegen_version();

}  // namespace kiln
