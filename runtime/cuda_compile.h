// PTX through the compile cache: NVRTC runs once per CUDA source and arch.
//
// The key hashes the CUDA C, the prelude, the arch, NVRTC's version and
// Kiln's version (with the code generators' fingerprint), so a changed
// lowering or toolkit never reuses stale PTX.
#pragma once

#include "runtime/compile_cache.h"
#include "targets/cuda/nvrtc_compiler.h"

namespace kiln {

struct CachedPtx {
  PtxModule module;
  bool from_cache = false;
};

CachedPtx cached_ptx(CompileCache& cache, const CudaSource& src);

}  // namespace kiln
