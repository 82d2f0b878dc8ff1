// AWQ: the packed layout read back the way vLLM unpacks it
// (AWQ_REVERSE_ORDER), the seed quantiser's error, and gemv_awq against a
// double-precision product on the dequantised weights and the interpreter.
// Tolerance: f32 accumulation over k (1e-5 of sum |w x|).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "ir/dtype.h"
#include "ir/error.h"
#include "kernels/quant/awq.h"
#include "support/quantized_x.h"
#include "support/runtime_fixture.h"

using namespace kiln;

namespace {
std::vector<float> random_w(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0, 0.5f);
  std::vector<float> w(n);
  for (float& v : w) v = d(rng);
  return w;
}
}  // namespace

TEST_CASE("AWQ packing matches vLLM's unpacking order", "[kernels][quant]") {
  const int64_t k = 64, n = 16, group = 32;
  std::vector<float> w = random_w(k * n, 1);
  AwqWeights a = awq_pack(w.data(), k, n, group);
  // vLLM: column 8c + j sits at bit 4 * AWQ_REVERSE_ORDER[j] of word c.
  const int reverse[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int64_t r = 0; r < k; ++r)
    for (int64_t c = 0; c < n; ++c) {
      int q = (a.qweight[r * n / 8 + c / 8] >> (4 * reverse[c % 8])) & 15;
      float s = f16_bits_to_f32(a.scales[(r / group) * n + c]);
      int expect = std::clamp(static_cast<int>(std::nearbyint(w[r * n + c] / s)), -8, 7) + 8;
      CHECK(q == expect);
      CHECK(((a.qzeros[(r / group) * n / 8 + c / 8] >> (4 * reverse[c % 8])) & 15) == 8);
    }
  std::vector<float> d = awq_dequantize(a);
  for (int64_t i = 0; i < k * n; ++i) {
    float s = f16_bits_to_f32(a.scales[(i / n / group) * n + i % n]);
    CHECK(std::fabs(d[i] - w[i]) <= s * 0.5f + 1e-6f);  // half a step; max|w| = 7s fits
  }
  REQUIRE_THROWS_WITH(awq_pack(w.data(), k, 12, group), Catch::Contains("multiple of 8"));
}

TEST_CASE("AWQ words built by hand read back in AutoAWQ's column order", "[kernels][quant]") {
  // AutoAWQ packs nibble i of a word from column 8c + [0, 2, 4, 6, 1, 3, 5,
  // 7][i]. Here k = 32 (one group), n = 8, scales 0.5: qweight row 0 holds
  // q = i in nibble i, row 1 q = 15 everywhere, the rest q = 0; the zero
  // word holds z = 7 - i in nibble i.
  AwqWeights a;
  a.k = 32;
  a.n = 8;
  a.group = 32;
  a.qweight.assign(32, 0);
  a.qweight[0] = 0x76543210;
  a.qweight[1] = static_cast<int32_t>(0xFFFFFFFFu);
  a.qzeros = {0x01234567};
  a.scales.assign(8, 0x3800);
  const float row0[8] = {-3.5f, 0.5f, -2.5f, 1.5f, -1.5f, 2.5f, -0.5f, 3.5f},
              row1[8] = {4, 6, 4.5f, 6.5f, 5, 7, 5.5f, 7.5f},
              rest[8] = {-3.5f, -1.5f, -3, -1, -2.5f, -0.5f, -2, 0};
  std::vector<float> d = awq_dequantize(a);                  // [k, n]
  std::vector<float> t = int4w_dequantize(awq_to_int4w(a));  // [n, k]: the loader's form
  for (int64_t r = 0; r < 32; ++r)
    for (int64_t c = 0; c < 8; ++c) {
      INFO("row " << r << " column " << c);
      const float want = r == 0 ? row0[c] : r == 1 ? row1[c] : rest[c];
      CHECK(d[r * 8 + c] == want);
      CHECK(t[c * 32 + r] == want);
    }
}

TEST_CASE("gemv_awq matches the dequantised product", "[kernels][qgemv]") {
  struct Case {
    int64_t k, n, group;
  };
  for (Case c : {Case{32, 8, 32}, Case{128, 72, 64}, Case{512, 200, 128}, Case{1024, 64, 128}})
    for (auto [bn, bk] : {std::pair{64, 32}, std::pair{8, 8}, std::pair{128, 16}}) {
      if (c.group % bk) continue;
      INFO("k=" << c.k << " n=" << c.n << " group=" << c.group << " BN=" << bn << " BK=" << bk);
      std::vector<float> w = random_w(c.k * c.n, 2), x = random_w(c.k, 3);
      AwqWeights a = awq_pack(w.data(), c.k, c.n, c.group);
      std::vector<float> wd = awq_dequantize(a), y(c.n), yi(c.n);
      Spec spec = find_kernel("gemv_awq")
                      .make_spec({}, {{"GROUP", c.group}, {"BLOCK_N", bn}, {"BLOCK_K", bk}});
      auto args = [&](std::vector<float>& out) -> LaunchArgs {
        return {{"qweight", a.qweight},
                {"qzeros", a.qzeros},
                {"scales", a.scales},
                {"x", x},
                {"y", out},
                {"k", c.k},
                {"n", c.n}};
      };
      kiln::test::runtime().launch(spec, args(y));
      kiln::test::runtime().interpret(spec, args(yi));
      for (int64_t j = 0; j < c.n; ++j) {
        double ref = 0, mag = 0;
        for (int64_t r = 0; r < c.k; ++r) {
          ref += static_cast<double>(wd[r * c.n + j]) * x[r];
          mag += std::fabs(static_cast<double>(wd[r * c.n + j]) * x[r]);
        }
        CHECK(std::fabs(y[j] - ref) <= 1e-5 * mag + 1e-6);
        CHECK(std::fabs(y[j] - yi[j]) <= 1e-5 * mag + 1e-6);
      }
    }
}

// The load-time repack into int4w rows keeps every weight, scale and zero
// point bit for bit, and gemv_int4w on it computes the AWQ product. Its
// tolerance is int4w's: x is quantised to 8-bit blocks, so each product may
// be off by half an activation step, sum_j |w_j| d_x(j) / 2, plus f32
// accumulation (1e-5 of sum |w x|); against x as quantised, only the
// latter.
TEST_CASE("AWQ repacked as int4w rows: same weights, same product", "[kernels][qgemv]") {
  const int64_t k = 512, n = 40;
  for (int64_t group : {32, 64, 128}) {
    INFO("group " << group);
    std::vector<float> w = random_w(k * n, 4), x = random_w(k, 5);
    AwqWeights a = awq_pack(w.data(), k, n, group);
    // Zero points other than the seed quantiser's 8, so their order is tested too.
    for (size_t i = 0; i < a.qzeros.size(); ++i)
      a.qzeros[i] = static_cast<int32_t>(0x7a3c51e6u + i);
    std::vector<float> wd = awq_dequantize(a);
    Int4wRows r = awq_to_int4w(a);
    int64_t ng = k / group;
    for (int64_t c = 0; c < n; ++c)
      for (int64_t i = 0; i < k; ++i) {
        int q = (r.q[c * k / 2 + i / 2] >> (4 * (i % 2))) & 15;
        int z = r.zeros[c * ng + i / group];
        float s = f16_bits_to_f32(r.scales[c * ng + i / group]);
        REQUIRE(static_cast<float>(q - z) * s == wd[i * n + c]);
      }
    test::QuantizedX xq = test::quantize_x(x);
    std::vector<float> y(n);
    Spec spec = find_kernel("gemv_int4w").make_spec({}, {{"GROUP", group}, {"ZP", 1}});
    test::runtime().launch(spec, {{"q", r.q},
                                  {"scales", r.scales},
                                  {"zeros", r.zeros},
                                  {"xq", xq.q},
                                  {"xd", xq.d},
                                  {"xs", xq.s},
                                  {"y", y},
                                  {"m", n},
                                  {"k", k},
                                  {"t", 1}});
    for (int64_t c = 0; c < n; ++c) {
      double ref = 0, mag = 0, bound = 0, qref = 0;
      for (int64_t i = 0; i < k; ++i) {
        double wi = wd[i * n + c];
        ref += wi * x[i];
        mag += std::fabs(wi * x[i]);
        bound += std::fabs(wi) * xq.d[i / 32] / 2;
        qref += wi * xq.q[i] * xq.d[i / 32];
      }
      CHECK(std::fabs(y[c] - ref) <= bound + 1e-5 * mag + 1e-6);
      CHECK(std::fabs(y[c] - qref) <= 1e-5 * mag + 1e-6);  // x as quantised: exact dots
    }
  }
  AwqWeights odd = awq_pack(random_w(96 * 8, 6).data(), 96, 8, 96);
  CHECK_THROWS_WITH(awq_to_int4w(odd), Catch::Contains("group size 96"));
}
