// gemm_tiles against a double-precision product with X rounded to the
// weights' dtype, as the kernel rounds it, and the interpreter; shapes off
// every tile side (rows, tokens, a k tail).
//
// Tolerance: f32 accumulation of k products (k * 2^-24 * sum |x w|), the
// same between JIT and interpreter (the order of the sums differs). A
// second check bounds the rounding of X itself against the unrounded
// product: half an ulp of X per product (f16 2^-11, bf16 2^-8 of sum |x w|).
#include <array>
#include <catch2/catch.hpp>
#include <cmath>

#include "support/runtime_fixture.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;

namespace {

double rounded(DType t, float v) {
  return t == DType::f16 ? f16_bits_to_f32(f32_to_f16_bits(v))
                         : bf16_bits_to_f32(f32_to_bf16_bits(v));
}

}  // namespace

TEST_CASE("gemm_tiles matches a double-precision reference", "[kernels][gemm]") {
  struct Dims {
    int64_t t, n, k;
  };
  for (DType tw : {DType::f16, DType::bf16})
    for (Dims s : {Dims{1, 1, 1}, Dims{9, 19, 100}, Dims{33, 70, 64}})
      for (auto [bn, bt, bk] :
           {std::array<int64_t, 3>{16, 8, 16}, std::array<int64_t, 3>{32, 16, 32}}) {
        INFO(dtype_name(tw) << " t=" << s.t << " n=" << s.n << " k=" << s.k << " tile " << bn << "x"
                            << bt << "x" << bk);
        Spec spec =
            find_kernel("gemm_tiles")
                .make_spec({{"W", tw}}, {{"BLOCK_N", bn}, {"BLOCK_T", bt}, {"BLOCK_K", bk}});
        auto w = HostBuffer::random(tw, s.n * s.k, 1),
             x = HostBuffer::random(DType::f32, s.t * s.k, 2);
        HostBuffer y(DType::f32, s.t * s.n), yi(DType::f32, s.t * s.n);
        kiln::test::runtime().launch(
            spec, {{"w", w}, {"x", x}, {"y", y}, {"t", s.t}, {"n", s.n}, {"k", s.k}});
        kiln::test::runtime().interpret(
            spec, {{"w", w}, {"x", x}, {"y", yi}, {"t", s.t}, {"n", s.n}, {"k", s.k}});
        const double x_ulp = tw == DType::f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
        double worst = 0, worst_exact = 0;
        for (int64_t t = 0; t < s.t; ++t)
          for (int64_t n = 0; n < s.n; ++n) {
            double ref = 0, exact = 0, mag = 0;
            for (int64_t j = 0; j < s.k; ++j) {
              const double wj = w.get(n * s.k + j), xj = x.get(t * s.k + j);
              ref += wj * rounded(tw, static_cast<float>(xj));
              exact += wj * xj;
              mag += std::fabs(wj * xj);
            }
            const double tol = s.k * 6e-8 * mag + 1e-7;
            const double got = y.get(t * s.n + n), interp = yi.get(t * s.n + n);
            worst = kiln::test::worse(worst, std::fabs(got - ref) / tol);
            worst = kiln::test::worse(worst, std::fabs(interp - ref) / tol);
            worst = kiln::test::worse(worst, std::fabs(got - interp) / tol);
            worst_exact =
                kiln::test::worse(worst_exact, std::fabs(got - exact) / (x_ulp * mag + tol));
          }
        CHECK(worst <= 1.0);
        CHECK(worst_exact <= 1.0);
      }
}
