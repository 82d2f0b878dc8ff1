// GEMV for every weight dtype against a double-precision product of the
// stored (already rounded) W and x, for shapes with M and K off the block
// sizes. Tolerance: f32 accumulation of K products, bounded by
// K * 2^-24 * sum|w x| (relative to the row's magnitude), plus the output
// rounding of X; and bit-identical results for a fixed thread count.
#include <catch2/catch.hpp>
#include <cmath>

#include "support/runtime_fixture.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;

TEST_CASE("gemv matches a double-precision reference", "[kernels][gemv]") {
  struct Dims {
    int64_t m, k;
  };
  for (DType tw : {DType::f32, DType::f16, DType::bf16})
    for (DType tx : {DType::f32, DType::f16})
      for (Dims s : {Dims{1, 1}, Dims{7, 127}, Dims{33, 4097}, Dims{130, 256}, Dims{5, 1000}})
        for (auto [bm, bk] : {std::pair{4, 128}, std::pair{1, 256}, std::pair{8, 32}}) {
          INFO(dtype_name(tw) << "/" << dtype_name(tx) << " m=" << s.m << " k=" << s.k
                              << " BLOCK_M=" << bm << " BLOCK_K=" << bk);
          Spec spec = find_kernel("gemv").make_spec({{"W", tw}, {"X", tx}},
                                                    {{"BLOCK_M", bm}, {"BLOCK_K", bk}});
          auto w = HostBuffer::random(tw, s.m * s.k, 11), x = HostBuffer::random(tx, s.k, 12);
          HostBuffer y(tx, s.m);
          kiln::test::runtime().launch(spec,
                                       {{"w", w}, {"x", x}, {"y", y}, {"m", s.m}, {"k", s.k}});
          std::vector<double> ref(s.m);
          double worst = 0;
          for (int64_t i = 0; i < s.m; ++i) {
            double acc = 0, mag = 0;
            for (int64_t j = 0; j < s.k; ++j) {
              acc += w.get(i * s.k + j) * x.get(j);
              mag += std::fabs(w.get(i * s.k + j) * x.get(j));
            }
            double tol =
                s.k * 6e-8 * mag + (tx == DType::f16 ? 1e-3 : 1e-6) * std::fabs(acc) + 1e-30;
            worst = kiln::test::worse(worst, std::fabs(y.get(i) - acc) / tol);
          }
          CHECK(worst <= 1.0);
          HostBuffer y2(tx, s.m);
          kiln::test::runtime().launch(spec,
                                       {{"w", w}, {"x", x}, {"y", y2}, {"m", s.m}, {"k", s.k}});
          CHECK(y.bytes() == y2.bytes());
        }
}

TEST_CASE("gemv agrees with the interpreter on a small case", "[kernels][gemv]") {
  Spec spec = find_kernel("gemv").make_spec({{"W", DType::f16}}, {{"BLOCK_M", 2}, {"BLOCK_K", 16}});
  auto w = HostBuffer::random(DType::f16, 9 * 37, 13), x = HostBuffer::random(DType::f32, 37, 14);
  HostBuffer y(DType::f32, 9), yi(DType::f32, 9);
  kiln::test::runtime().launch(spec, {{"w", w}, {"x", x}, {"y", y}, {"m", 9}, {"k", 37}});
  kiln::test::runtime().interpret(spec, {{"w", w}, {"x", x}, {"y", yi}, {"m", 9}, {"k", 37}});
  std::vector<double> ref(9);
  for (int i = 0; i < 9; ++i) ref[i] = yi.get(i);
  CHECK(kiln::test::worst_error(y, ref, 1e-6, 1e-6) <= 1.0);
}

// FP8 checkpoints' weights: e4m3 values times a scale per B x B block.
// Reference: the double product of the stored values and their block's
// scale; tolerance as above (f32 accumulation, plus one rounding of each
// block's scaled sum). Shapes put rows and columns of the last program and
// the last block past M and K. The last two cases put |x * scale| near
// 1e12 and 1e-15: the widening's 2^-120 (kernels/quant/fp8.h) must be
// undone in halves, or the first overflows and the second underflows.
TEST_CASE("gemv with FP8 block scales matches a double-precision reference", "[kernels][gemv]") {
  struct Case {
    int64_t m, k, block, bm, bk;
    double s_lo = 0.001, s_hi = 0.01, x_mag = 1;
  };
  for (Case c :
       {Case{37, 100, 32, 4, 16}, Case{33, 256, 128, 8, 64}, Case{130, 300, 128, 4, 128},
        Case{5, 17, 16, 2, 16}, Case{7, 200, 128, 1, 64}, Case{33, 256, 128, 4, 64, 1e5, 1e6, 1e6},
        Case{33, 256, 128, 4, 64, 1e-9, 1e-8, 1e-6}}) {
    INFO("m=" << c.m << " k=" << c.k << " SCALE_BLOCK=" << c.block << " BLOCK_M=" << c.bm
              << " BLOCK_K=" << c.bk << " scales " << c.s_lo << ".." << c.s_hi
              << " |x| <= " << c.x_mag);
    Spec spec = find_kernel("gemv").make_spec(
        {{"W", DType::f8e4m3}}, {{"BLOCK_M", c.bm}, {"BLOCK_K", c.bk}, {"SCALE_BLOCK", c.block}});
    const int64_t kb = (c.k + c.block - 1) / c.block, mb = (c.m + c.block - 1) / c.block;
    auto w = HostBuffer::random(DType::f8e4m3, c.m * c.k, 21),
         x = HostBuffer::random(DType::f32, c.k, 22, -c.x_mag, c.x_mag),
         ws = HostBuffer::random(DType::f32, mb * kb, 23, c.s_lo, c.s_hi);
    HostBuffer y(DType::f32, c.m);
    // Block-scaled FP8 weights are a buffer of bytes (u8) in the kernel.
    kiln::test::runtime().launch(spec, {{"w", LaunchArg(w.arg().data, w.size(), DType::u8)},
                                        {"x", x},
                                        {"y", y},
                                        {"ws", ws},
                                        {"m", c.m},
                                        {"k", c.k}});
    double worst = 0;
    for (int64_t i = 0; i < c.m; ++i) {
      double acc = 0, mag = 0;
      for (int64_t j = 0; j < c.k; ++j) {
        double p = w.get(i * c.k + j) * ws.get(i / c.block * kb + j / c.block) * x.get(j);
        acc += p;
        mag += std::fabs(p);
      }
      worst = kiln::test::worse(worst, std::fabs(y.get(i) - acc) / (c.k * 6e-8 * mag + 1e-30));
    }
    CHECK(worst <= 1.0);
  }
}

TEST_CASE("gemv rejects a scale block that splits a step", "[kernels][gemv][error]") {
  CHECK_THROWS_WITH(kiln::test::runtime().compile(find_kernel("gemv").make_spec(
                        {{"W", DType::f8e4m3}}, {{"BLOCK_K", 64}, {"SCALE_BLOCK", 96}})),
                    Catch::Contains("SCALE_BLOCK (96) must be 0 or a multiple of BLOCK_K (64)"));
}
