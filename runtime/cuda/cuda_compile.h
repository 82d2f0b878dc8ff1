// PTX through the compile cache: NVRTC runs once per CUDA source and arch.
//
// The key hashes the CUDA C, the prelude, the arch and cuda_codegen_version()
// (NVRTC's version, Kiln's version and the fingerprint of the CUDA code
// generator's sources), so a changed lowering or toolkit never reuses stale
// PTX, and a changed CPU lowering never invalidates it.
#pragma once

#include <string>

#include "runtime/compile_cache.h"
#include "targets/cuda/nvrtc_compiler.h"

namespace kiln {

struct CachedPtx {
  PtxModule module;
  bool from_cache = false;
};

CachedPtx cached_ptx(CompileCache& cache, const CudaSource& src);

// "kiln 0.1.0+<CUDA codegen fingerprint>": what a CUDA program's key names
// of Kiln (the toolchain is added by each CUDA backend).
std::string cuda_codegen_version();

}  // namespace kiln
