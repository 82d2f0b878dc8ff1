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

CachedModule cached_module(CompileCache& cache, const CudaSource& src, int gpu_sm) {
  std::string what = gpu_sm ? "cubin for sm_" + std::to_string(gpu_sm) : std::string("ptx");
  std::string key = "kiln cuda " + what + "\n" + cuda_codegen_version() + "\nnvrtc " +
                    nvrtc_version() + "\nsm_" + std::to_string(src.sm) + "\n" +
                    std::string(cuda_prelude()) + "\n" + src.code;
  std::string digest = sha256_hex(key);
  CachedModule r;
  if (std::optional<std::string> hit = cache.load(digest)) {
    (gpu_sm ? r.module.cubin : r.module.ptx) = *hit;
    r.module.arch = "sm_" + std::to_string(gpu_sm ? gpu_sm : src.sm);
    r.from_cache = true;
    return r;
  }
  r.module = gpu_sm ? compile_cubin(src, gpu_sm) : compile_ptx(src);
  cache.store(digest, src.entry, gpu_sm ? r.module.cubin : r.module.ptx);
  return r;
}

}  // namespace kiln
