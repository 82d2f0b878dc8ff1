#include "runtime/cuda/cuda_compile.h"

#include "runtime/compile_key.h"

#ifndef KILN_VERSION
#error "KILN_VERSION must be defined by the build"
#endif
#ifndef KILN_CUDA_CODEGEN_FINGERPRINT
#error "KILN_CUDA_CODEGEN_FINGERPRINT must be defined by the build"
#endif

namespace kiln {

std::string cuda_codegen_version() {
  return "kiln " KILN_VERSION "+" KILN_CUDA_CODEGEN_FINGERPRINT;
}

CachedPtx cached_ptx(CompileCache& cache, const CudaSource& src) {
  std::string key = "kiln cuda ptx\n" + cuda_codegen_version() + "\nnvrtc " + nvrtc_version() +
                    "\nsm_" + std::to_string(src.sm) + "\n" + std::string(cuda_prelude()) + "\n" +
                    src.code;
  std::string digest = sha256_hex(key);
  CachedPtx r;
  if (std::optional<std::string> hit = cache.load(digest)) {
    r.module.ptx = *hit;
    r.module.arch = "sm_" + std::to_string(src.sm);
    r.from_cache = true;
    return r;
  }
  r.module = compile_ptx(src);
  cache.store(digest, src.entry, r.module.ptx);
  return r;
}

}  // namespace kiln
