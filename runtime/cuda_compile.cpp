#include "runtime/cuda_compile.h"

#include "runtime/compile_key.h"

namespace kiln {

CachedPtx cached_ptx(CompileCache& cache, const CudaSource& src) {
  std::string key = "kiln cuda ptx\n" + kiln_version() + "\nnvrtc " + nvrtc_version() + "\nsm_" +
                    std::to_string(src.sm) + "\n" + std::string(cuda_prelude()) + "\n" + src.code;
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
