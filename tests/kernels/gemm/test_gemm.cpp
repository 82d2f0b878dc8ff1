// gemm against a double-precision product and the interpreter, for shapes
// off every block size. Tolerance: f32 accumulation of k products
// (k * 2^-24 * sum |x w|); the JIT sums its per-lane FMAs in another order
// than the interpreter, so the two agree within the same bound rather than
// bit for bit. Blocks: the default (one k chunk at these sizes); odd blocks
// and panels, so panels end inside a block (rows and tokens repeated) and k
// runs in several chunks with a tail; one token per block.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>

#include "support/runtime_fixture.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;

TEST_CASE("gemm matches a double-precision reference", "[kernels][gemm]") {
  struct Dims {
    int64_t t, n, k;
  };
  for (DType tw : {DType::f32, DType::f16, DType::bf16})
    for (Dims s : {Dims{1, 1, 1}, Dims{2, 33, 100}, Dims{7, 64, 256}, Dims{13, 20, 17}})
      for (auto [bt, bn, bk, pt, pn, pk] : {std::array<int64_t, 6>{4, 6, 16, 256, 48, 4096},
                                            std::array<int64_t, 6>{3, 5, 8, 7, 11, 32},
                                            std::array<int64_t, 6>{1, 8, 32, 4, 16, 64}}) {
        INFO(dtype_name(tw) << " t=" << s.t << " n=" << s.n << " k=" << s.k << " blocks " << bt
                            << "," << bn << "," << bk << " panels " << pt << "," << pn << ","
                            << pk);
        Spec spec = find_kernel("gemm").make_spec({{"W", tw}}, {{"BLOCK_T", bt},
                                                                {"BLOCK_N", bn},
                                                                {"BLOCK_K", bk},
                                                                {"PANEL_T", pt},
                                                                {"PANEL_N", pn},
                                                                {"PANEL_K", pk}});
        auto w = HostBuffer::random(tw, s.n * s.k, 1),
             x = HostBuffer::random(DType::f32, s.t * s.k, 2);
        HostBuffer y(DType::f32, s.t * s.n), yi(DType::f32, s.t * s.n);
        kiln::test::runtime().launch(
            spec, {{"w", w}, {"x", x}, {"y", y}, {"t", s.t}, {"n", s.n}, {"k", s.k}});
        kiln::test::runtime().interpret(
            spec, {{"w", w}, {"x", x}, {"y", yi}, {"t", s.t}, {"n", s.n}, {"k", s.k}});
        double worst = 0;
        for (int64_t t = 0; t < s.t; ++t)
          for (int64_t n = 0; n < s.n; ++n) {
            double ref = 0, mag = 0;
            for (int64_t j = 0; j < s.k; ++j) {
              ref += w.get(n * s.k + j) * x.get(t * s.k + j);
              mag += std::fabs(w.get(n * s.k + j) * x.get(t * s.k + j));
            }
            double tol = s.k * 6e-8 * mag + 1e-7;
            worst = kiln::test::worse(worst, std::fabs(y.get(t * s.n + n) - ref) / tol);
            worst = kiln::test::worse(worst, std::fabs(yi.get(t * s.n + n) - ref) / tol);
            worst =
                kiln::test::worse(worst, std::fabs(y.get(t * s.n + n) - yi.get(t * s.n + n)) / tol);
          }
        CHECK(worst <= 1.0);
      }
}

TEST_CASE("gemm rejects a k chunk that is not a whole number of steps", "[kernels][gemm][error]") {
  Spec spec =
      find_kernel("gemm").make_spec({{"W", DType::f16}}, {{"BLOCK_K", 16}, {"PANEL_K", 40}});
  auto w = HostBuffer::random(DType::f16, 8 * 64, 1), x = HostBuffer::random(DType::f32, 4 * 64, 2);
  HostBuffer y(DType::f32, 4 * 8);
  CHECK_THROWS_WITH(kiln::test::runtime().launch(
                        spec, {{"w", w}, {"x", x}, {"y", y}, {"t", 4}, {"n", 8}, {"k", 64}}),
                    Catch::Contains("PANEL_K (40) must be a multiple of BLOCK_K (16)"));
}

// FP8 checkpoints' weights (e4m3 times a scale per B x B block) against the
// double product of the stored values and their block's scale, within the
// bound above; panels and blocks off the shapes so rows of a panel's last
// block repeat across a scale-block boundary. The last two cases put
// |x * scale| near 1e12 and 1e-15, as gemv's test does.
TEST_CASE("gemm with FP8 block scales matches a double-precision reference", "[kernels][gemm]") {
  struct Case {
    int64_t t, n, k, block, bk, pn, pk;
    double s_lo = 0.001, s_hi = 0.01, x_mag = 1;
  };
  for (Case c : {Case{5, 37, 100, 32, 16, 48, 4096}, Case{9, 70, 256, 128, 16, 11, 64},
                 Case{3, 20, 17, 16, 16, 16, 32}, Case{5, 37, 100, 32, 16, 48, 64, 1e5, 1e6, 1e6},
                 Case{5, 37, 100, 32, 16, 48, 64, 1e-9, 1e-8, 1e-6}}) {
    INFO("t=" << c.t << " n=" << c.n << " k=" << c.k << " SCALE_BLOCK=" << c.block);
    Spec spec = find_kernel("gemm").make_spec(
        {{"W", DType::f8e4m3}},
        {{"BLOCK_K", c.bk}, {"PANEL_N", c.pn}, {"PANEL_K", c.pk}, {"SCALE_BLOCK", c.block}});
    const int64_t kb = (c.k + c.block - 1) / c.block, nb = (c.n + c.block - 1) / c.block;
    auto w = HostBuffer::random(DType::f8e4m3, c.n * c.k, 31),
         x = HostBuffer::random(DType::f32, c.t * c.k, 32, -c.x_mag, c.x_mag),
         ws = HostBuffer::random(DType::f32, nb * kb, 33, c.s_lo, c.s_hi);
    HostBuffer y(DType::f32, c.t * c.n);
    // Block-scaled FP8 weights are a buffer of bytes (u8) in the kernel.
    kiln::test::runtime().launch(spec, {{"w", LaunchArg(w.arg().data, w.size(), DType::u8)},
                                        {"x", x},
                                        {"y", y},
                                        {"ws", ws},
                                        {"t", c.t},
                                        {"n", c.n},
                                        {"k", c.k}});
    double worst = 0;
    for (int64_t t = 0; t < c.t; ++t)
      for (int64_t n = 0; n < c.n; ++n) {
        double ref = 0, mag = 0;
        for (int64_t j = 0; j < c.k; ++j) {
          double p =
              w.get(n * c.k + j) * ws.get(n / c.block * kb + j / c.block) * x.get(t * c.k + j);
          ref += p;
          mag += std::fabs(p);
        }
        worst = kiln::test::worse(worst,
                                  std::fabs(y.get(t * c.n + n) - ref) / (c.k * 6e-8 * mag + 1e-30));
      }
    CHECK(worst <= 1.0);
  }
}
