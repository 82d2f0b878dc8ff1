// The CUDA simulator's kept builds: counted and removed for `kiln cache`,
// and rebuilt after a clear.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "targets/cuda/cuda_simulator.h"

using namespace kiln;

namespace {

CudaSource store_one() {
  CudaSource src;
  src.entry = "store_one";
  src.threads = 32;
  src.code = R"(#include "kiln_cuda.cuh"
extern "C" __global__ void store_one(float* p) { if (threadIdx.x == 0) p[0] = 1.0f; }
#ifdef KILN_SIM
extern "C" void kiln_sim_thread(void* const* a) { store_one(*(float* const*)a[0]); }
#endif
)";
  return src;
}

// Points $TMPDIR at a fresh folder for the test's lifetime.
struct TempDirScope {
  std::string old, dir;
  TempDirScope() {
    if (const char* t = std::getenv("TMPDIR")) old = t;
    char tmpl[] = "/tmp/kiln-sim-cache-test-XXXXXX";
    dir = mkdtemp(tmpl);
    setenv("TMPDIR", dir.c_str(), 1);
  }
  ~TempDirScope() {
    if (old.empty())
      unsetenv("TMPDIR");
    else
      setenv("TMPDIR", old.c_str(), 1);
    std::filesystem::remove_all(dir);
  }
};

}  // namespace

TEST_CASE("cuda simulator: builds are counted, cleared and rebuilt", "[cuda][sim]") {
  TempDirScope scope;
  REQUIRE(SimulatedKernel::cache_dir().rfind(scope.dir, 0) == 0);
  REQUIRE(SimulatedKernel::cache_stats().builds == 0);

  Kernel k;
  k.name = "store_one";
  k.params = {Param{"p", ParamKind::Buffer, DType::f32}};
  float out = 0;
  SimulatedKernel::compile(store_one())->launch(k, {Arg::buffer(&out, 1)}, {1, 1, 1});
  REQUIRE(out == 1.0f);
  SimulatedKernel::CacheStats s = SimulatedKernel::cache_stats();
  CHECK(s.builds == 1);
  CHECK(s.bytes > 0);

  CHECK(SimulatedKernel::clear_cache() == 1);
  CHECK(SimulatedKernel::cache_stats().builds == 0);
  CHECK(SimulatedKernel::cache_stats().bytes == 0);

  out = 0;
  SimulatedKernel::compile(store_one())->launch(k, {Arg::buffer(&out, 1)}, {1, 1, 1});
  CHECK(out == 1.0f);
  CHECK(SimulatedKernel::cache_stats().builds == 1);
}
