// The CUDA backend's compile step: NVRTC's cubin for the GPU at hand, kept
// in the compile cache apart from the PTX `kiln inspect` keeps, so a later
// process loads machine code without the driver compiling anything.
// Skipped (with a warning) where the CUDA toolkit is absent.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "ir/builder.h"
#include "ir/error.h"
#include "runtime/cuda/cuda_compile.h"
#include "support/cuda_toolkit.h"
#include "support/ir_helpers.h"

using namespace kiln;
using namespace kiln::test;
namespace fs = std::filesystem;

namespace {

CudaSource scale_source(int sm) {
  KernelBuilder b("scale", spec_for("scale"));
  auto x = b.buffer("x", DType::f32), y = b.buffer("y", DType::f32);
  auto off = arange(128);
  store(y + off, load(x + off) * 2.0f);
  CudaOptions o;
  o.sm = sm;
  return emit_cuda(b.finish(), o);
}

bool is_elf(const std::string& image) {
  return image.rfind(
             "\x7f"
             "ELF",
             0) == 0;
}

}  // namespace

TEST_CASE("cuda: the backend's cubin is compiled for the GPU and cached apart from the PTX",
          "[cuda][nvrtc][cache]") {
  if (!have_cuda_toolkit()) return;
  fs::path dir = fs::temp_directory_path() / ("kiln-test-cubin-" + std::to_string(getpid()));
  fs::remove_all(dir);
  CompileCache cache(dir.string());
  for (int sm : {80, 90}) {
    INFO("sm_" << sm);
    CudaSource src = scale_source(sm);
    CachedModule first = cached_module(cache, src, sm);
    CHECK_FALSE(first.from_cache);
    CHECK(is_elf(first.module.cubin));
    CHECK(first.module.arch == "sm_" + std::to_string(sm));
    CHECK(first.module.ptx.find(".entry " + src.entry) != std::string::npos);

    CachedModule again = cached_module(cache, src, sm);
    CHECK(again.from_cache);
    CHECK(again.module.cubin == first.module.cubin);
    CHECK(again.module.ptx.empty());

    // The PTX of the same source is its own entry, and has no cubin.
    CachedModule ptx = cached_module(cache, src);
    CHECK_FALSE(ptx.from_cache);
    CHECK(ptx.module.cubin.empty());
    CHECK(ptx.module.ptx == compile_ptx(src).ptx);
  }
  // sm_80 code runs on an sm_90 GPU; sm_90 code cannot be built for sm_80.
  CHECK(is_elf(compile_cubin(scale_source(80), 90).cubin));
  CHECK_THROWS_WITH(compile_cubin(scale_source(90), 80),
                    Catch::Contains("generated for sm_90 and cannot be compiled for sm_80"));
  fs::remove_all(dir);
}
