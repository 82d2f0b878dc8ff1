// The 16-row int4w interleave (kernels/quant/int4w.h) and gemv_int4w_rows16
// over it, including AWQ weights repacked at load (awq_to_int4w, then the
// interleave).
//
// Layout: every code, scale and zero point keeps its value, so the
// interleave dequantises to exactly the row-major form's weights.
//
// Kernel tolerance: support/quantized_x.h's quantized_gemm_error against a
// double-precision product of the row-major form's weights (independent of
// the interleave): x quantised to Q8_K blocks moves each product by at most
// half a step, f32 accumulation adds 1e-5 of sum |w x|; JIT and
// interpreter differ only in reassociated sums.
#include <catch2/catch.hpp>

#include "ir/dtype.h"
#include "kernels/quant/awq.h"
#include "kernels/quant/int4w.h"
#include "support/quantized_x.h"
#include "support/random_int4w.h"
#include "support/runtime_fixture.h"

using namespace kiln;
using kiln::test::random_int4w;

namespace {

void check_product(const Int4wRows& r, int64_t t, int bt) {
  INFO("m=" << r.m << " k=" << r.k << " group=" << r.group << " zp=" << !r.zeros.empty()
            << " t=" << t << " BLOCK_T=" << bt);
  std::vector<uint8_t> w = interleave_int4w_rows16(r);
  std::vector<float> x = test::normal_floats(static_cast<size_t>(t * r.k), 7);
  test::QuantizedX xq = test::quantize_x(x, false, 256);
  Spec spec =
      find_kernel("gemv_int4w_rows16")
          .make_spec({}, {{"GROUP", r.group}, {"ZP", r.zeros.empty() ? 0 : 1}, {"BLOCK_T", bt}});
  auto out = test::run_quantized_gemm(spec, w, xq, r.m, r.k, t);
  auto e =
      test::quantized_gemm_error(int4w_dequantize(r), x, xq, out.jit, out.interpreter, r.m, r.k, t);
  CHECK(e.vs_reference <= 1.0);
  CHECK(e.vs_interpreter <= 1.0);
  CHECK(e.vs_quantized <= 1.0);
}

}  // namespace

TEST_CASE("the 16-row int4w interleave keeps every weight", "[kernels][quant]") {
  for (int64_t group : {32, 64, 128})
    for (bool zp : {false, true}) {
      INFO("group " << group << " zp " << zp);
      Int4wRows r = random_int4w(48, 768, group, zp, 1);
      std::vector<uint8_t> w = interleave_int4w_rows16(r);
      Int4wRows16 layout{group, zp};
      REQUIRE(static_cast<int64_t>(w.size()) == layout.bytes(48, 768));
      CHECK(layout.codes_at() % 64 == 0);
      CHECK(dequantize_int4w_rows16(layout, w.data(), 48, 768) == int4w_dequantize(r));
    }
}

TEST_CASE("the 16-row int4w interleave refuses shapes off its tiles and other groups",
          "[kernels][quant][error]") {
  REQUIRE_THROWS_WITH(interleave_int4w_rows16(random_int4w(20, 256, 128, false, 2)),
                      Catch::Contains("[20, 256]") && Catch::Contains("multiple of 16"));
  REQUIRE_THROWS_WITH(interleave_int4w_rows16(random_int4w(16, 384, 128, false, 2)),
                      Catch::Contains("[16, 384]") && Catch::Contains("k of 256"));
  REQUIRE_THROWS_WITH(interleave_int4w_rows16(random_int4w(16, 256, 256, false, 2)),
                      Catch::Contains("group size 256"));
}

TEST_CASE("gemv_int4w_rows16 matches the dequantised product", "[kernels][qgemv]") {
  for (int64_t group : {32, 64, 128})
    for (bool zp : {false, true}) {
      check_product(random_int4w(16, 256, group, zp, 3), 1, 1);
      check_product(random_int4w(48, 1024, group, zp, 4), 1, 1);
    }
  // Token counts off the token block (prompt GEMM).
  for (int64_t t : {2, 5, 9})
    for (int bt : {1, 4, 6}) check_product(random_int4w(32, 512, 64, true, 5), t, bt);
}

TEST_CASE("AWQ weights repacked and interleaved compute the AWQ product", "[kernels][qgemv]") {
  const int64_t k = 512, n = 32;
  for (int64_t group : {32, 128}) {
    INFO("group " << group);
    std::vector<float> wf = test::normal_floats(static_cast<size_t>(k * n), 8);
    AwqWeights a = awq_pack(wf.data(), k, n, group);
    // Zero points other than the seed quantiser's 8, so their order is tested too.
    for (size_t i = 0; i < a.qzeros.size(); ++i)
      a.qzeros[i] = static_cast<int32_t>(0x5b2e94d1u + 7 * i);
    std::vector<float> wd = awq_dequantize(a);  // [k, n]
    Int4wRows r = awq_to_int4w(a);
    std::vector<uint8_t> w = interleave_int4w_rows16(r);
    std::vector<float> got = dequantize_int4w_rows16(Int4wRows16{group, true}, w.data(), n, k);
    for (int64_t c = 0; c < n; ++c)
      for (int64_t i = 0; i < k; ++i) REQUIRE(got[c * k + i] == wd[i * n + c]);
    check_product(r, 1, 1);
  }
}

TEST_CASE("gemv_int4w_rows16 refuses shapes off its tiles and other groups",
          "[kernels][qgemv][error]") {
  std::vector<uint8_t> w(2112);
  std::vector<int8_t> xq(256);
  std::vector<float> xd(8), y(20);
  std::vector<int32_t> xs(8);
  auto launch = [&](int64_t group, int64_t m, int64_t k) {
    test::runtime().launch(
        find_kernel("gemv_int4w_rows16").make_spec({}, {{"GROUP", group}}),
        {{"w", w}, {"xq", xq}, {"xd", xd}, {"xs", xs}, {"y", y}, {"m", m}, {"k", k}, {"t", 1}});
  };
  REQUIRE_THROWS_WITH(launch(128, 20, 256), Catch::Contains("gemv_int4w_rows16") &&
                                                Catch::Contains("m a multiple of 16"));
  REQUIRE_THROWS_WITH(launch(128, 16, 128), Catch::Contains("k of 256"));
  REQUIRE_THROWS_WITH(launch(96, 16, 256), Catch::Contains("GROUP must be 32, 64 or 128"));
}
