// NVRTC and ptxas on the CUDA lowering's output: tensor-core dots become
// mma.sync in the PTX, grouped 8-bit dots dp4a, lookup tables global
// arrays read through the read-only cache, a rejected source reports
// NVRTC's log with the path of the source, and ptxas' resource report is
// read. Skipped (with a warning) where the CUDA toolkit is absent.
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <vector>

#include "ir/builder.h"
#include "ir/error.h"
#include "support/cuda_toolkit.h"
#include "support/ir_helpers.h"
#include "targets/cuda/nvrtc_compiler.h"

using namespace kiln;
using namespace kiln::test;

namespace {

Kernel mma_kernel(DType t) {
  KernelBuilder b("mmak", spec_for("mmak"));
  DType bt = is_float(t) ? t : DType::i8, ct = is_float(t) ? DType::f32 : DType::i32;
  auto a = b.buffer("a", t), bb = b.buffer("b", bt), o = b.buffer("o", ct);
  auto va = load(a + reshape(arange(32 * 32), {32, 32}));
  auto vb = load(bb + reshape(arange(32 * 16), {32, 16}));
  auto idx = reshape(arange(32 * 16), {32, 16});
  store(o + idx, dot(va, vb, load(o + idx)));
  return b.finish();
}

}  // namespace

TEST_CASE("cuda: f16/bf16/int8 dots are mma.sync in the PTX on sm_80 and sm_90", "[cuda][nvrtc]") {
  if (!have_cuda_toolkit()) return;
  for (DType t : {DType::f16, DType::bf16, DType::i8, DType::u8})
    for (int sm : {80, 90}) {
      INFO(dtype_name(t) << " sm_" << sm);
      CudaOptions o;
      o.sm = sm;
      CudaModule m = compile_ptx(emit_cuda(mma_kernel(t), o));
      std::string instr =
          is_float(t) ? "mma.sync.aligned.m16n8k16.row.col.f32." + std::string(dtype_name(t))
                      : "mma.sync.aligned.m16n8k32.row.col.s32." +
                            std::string(t == DType::i8 ? "s8" : "u8") + ".s8.s32";
      CHECK(m.ptx.find(instr) != std::string::npos);
      PtxasReport r = run_ptxas(m, sm);
      CHECK(r.registers > 0);
      CHECK(r.text.find("Used") != std::string::npos);
    }
}

TEST_CASE("cuda: dot_groups are dp4a in the PTX", "[cuda][nvrtc]") {
  if (!have_cuda_toolkit()) return;
  for (DType t : {DType::u8, DType::i8}) {
    INFO(dtype_name(t));
    KernelBuilder b("dg", spec_for("dg"));
    auto a = b.buffer("a", t), w = b.buffer("b", DType::i8), o = b.buffer("o", DType::i32);
    auto off = arange(256);
    store(o + arange(64), dot_groups(load(a + off), load(w + off)));
    CudaModule m = compile_ptx(emit_cuda(b.finish()));
    CHECK(m.ptx.find(t == DType::u8 ? "dp4a.u32.s32" : "dp4a.s32.s32") != std::string::npos);
  }
}

TEST_CASE("cuda: lookup tables compile with NVRTC and ptxas", "[cuda][nvrtc]") {
  if (!have_cuda_toolkit()) return;
  KernelBuilder b("lut", spec_for("lut"));
  auto x = b.buffer("x", DType::u8), q = b.buffer("q", DType::i8), g = b.buffer("g", DType::i64);
  auto off = arange(256);
  auto codes = load(x + off);
  store(q + off, lookup({-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113},
                        DType::i8, codes));
  std::vector<int64_t> grid(256);
  for (size_t i = 0; i < grid.size(); ++i) grid[i] = static_cast<int64_t>(i * 0x0101010101010101);
  grid[255] = std::numeric_limits<int64_t>::min();
  store(g + off, lookup(grid, DType::i64, codes));
  Kernel k = b.finish();
  for (int sm : {80, 90}) {
    INFO("sm_" << sm);
    CudaOptions o;
    o.sm = sm;
    CudaModule m = compile_ptx(emit_cuda(k, o));
    // Global arrays of bytes, read through the read-only data cache.
    CHECK(m.ptx.find(".global .align 1 .b8 kiln_table0[16] = {129, 152,") != std::string::npos);
    CHECK(m.ptx.find(".global .align 8 .b8 kiln_table1[2048]") != std::string::npos);
    CHECK(m.ptx.find("ld.global.nc.u64") != std::string::npos);
    CHECK(run_ptxas(m, sm).registers > 0);
  }
}

TEST_CASE("cuda: NVRTC's log and the source location are shown on failure",
          "[cuda][nvrtc][errors]") {
  if (!have_cuda_toolkit()) return;
  CudaSource src;
  src.entry = "broken";
  src.code =
      "#include \"kiln_cuda.cuh\"\nextern \"C\" __global__ void broken() { undeclared_x = 1; }\n";
  CHECK_THROWS_WITH(compile_ptx(src), Catch::Contains("NVRTC rejected kernel 'broken' for sm_80") &&
                                          Catch::Contains("broken-sm_80.cu") &&
                                          Catch::Contains("undeclared_x"));
}

TEST_CASE("cuda: too much shared memory is refused with the limit", "[cuda][errors]") {
  KernelBuilder b("bigdot", spec_for("bigdot"));
  auto a = b.buffer("a", DType::f32), o = b.buffer("o", DType::f32);
  auto va = load(a + reshape(arange(128 * 256), {128, 256}));
  auto vb = load(a + reshape(arange(256 * 128), {256, 128}));
  auto idx = reshape(arange(128 * 128), {128, 128});
  store(o + idx, dot(va, vb, load(o + idx)));
  Kernel k = b.finish();
  CHECK_THROWS_WITH(emit_cuda(k), Catch::Contains("CUDA kernel 'bigdot' for sm_80: needs 262144 "
                                                  "bytes of shared memory per block; the limit "
                                                  "is 166912"));
}

TEST_CASE("cuda: a block whose registers do not fit is refused with the limit", "[cuda][errors]") {
  CudaSource src;
  src.entry = "wide";
  src.sm = 90;
  src.threads = 256;
  CHECK_NOTHROW(check_cuda_registers(src, 255));  // 8 warps of 8192
  src.threads = 512;
  CHECK_THROWS_WITH(check_cuda_registers(src, 255),
                    Catch::Contains("CUDA kernel 'wide' for sm_90: 512 threads per block of 255 "
                                    "registers each need 131072 registers; a block has 65536"));
  CHECK_NOTHROW(check_cuda_registers(src, 128));
  src.threads = 1024;
  CHECK_THROWS_WITH(check_cuda_registers(src, 65), Catch::Contains("need 73728 registers"));
}
