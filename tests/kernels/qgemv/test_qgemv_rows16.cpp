// The 16-row interleaved layouts (every 32-weight block format, Q2_K-Q6_K, IQ4_XS)
// (kernels/quant/rows16.h) and qgemv_rows16 over them.
//
// Layout: interleaving keeps every weight's value: its dequantisation
// equals ggml's dequantiser on the original blocks bit for bit.
//
// Kernel tolerance, as qgemv's: support/quantized_x.h's quantized_gemm_error
// (x quantised to Q8_K blocks moves each product by at most half a step).
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "kernels/quant/ggml_blocks.h"
#include "kernels/quant/rows16.h"
#include "support/quantized_x.h"
#include "support/runtime_fixture.h"

using namespace kiln;
using kiln::test::quantize_x;
using kiln::test::QuantizedX;

namespace {
const TensorType kFormats[] = {
    TensorType::q4_0,   TensorType::q4_1,  TensorType::q5_0,  TensorType::q5_1, TensorType::q8_0,
    TensorType::iq4_nl, TensorType::mxfp4, TensorType::q2_K,  TensorType::q3_K, TensorType::q4_K,
    TensorType::q5_K,   TensorType::q6_K,  TensorType::iq4_xs};

// Blocks of m x k weights of type t from ggml's reference quantiser.
std::vector<uint8_t> weights(TensorType t, int64_t m, int64_t k, uint64_t seed) {
  std::vector<float> wf = kiln::test::normal_floats(static_cast<size_t>(m * k), seed);
  const TensorTypeInfo& f = tensor_type_info(t);
  std::vector<uint8_t> w(static_cast<size_t>(m * k / f.block_elems * f.block_bytes));
  ggml::quantize(t, wf.data(), m * k, w.data());
  return w;
}

// Blocks whose every code and group scale is at its largest magnitude
// (ggml's layouts, FORMATS.md: all bits set, d 1 and Q2_K's dmin 1/4,
// Q6_K's scales -128), so the kernels' integer sums reach their bounds.
std::vector<uint8_t> saturated_blocks(TensorType t, int64_t m, int64_t k) {
  const TensorTypeInfo& f = tensor_type_info(t);
  std::vector<uint8_t> w(static_cast<size_t>(m * k / f.block_elems * f.block_bytes), 0xFF);
  for (size_t b = 0; b < w.size(); b += static_cast<size_t>(f.block_bytes)) {
    uint8_t* p = &w[b];
    auto f16 = [&](int at, uint16_t v) {
      p[at] = static_cast<uint8_t>(v & 0xFF);
      p[at + 1] = static_cast<uint8_t>(v >> 8);
    };
    switch (t) {
      case TensorType::q2_K: f16(80, 0x3C00), f16(82, 0x3400); break;
      case TensorType::q3_K: f16(108, 0x3C00); break;
      case TensorType::q6_K: std::fill(p + 192, p + 208, uint8_t{0x80}), f16(208, 0x3C00); break;
      default: FAIL("no saturated blocks for " << f.name);
    }
  }
  return w;
}

void check_rows16(TensorType f, int64_t m, int64_t k, int64_t t, int bt,
                  const std::vector<uint8_t>& blocks, const std::vector<float>& x) {
  INFO(tensor_type_info(f).name << " m=" << m << " k=" << k << " t=" << t << " BLOCK_T=" << bt);
  std::vector<uint8_t> w = ggml::interleave_rows16(f, blocks.data(), m, k);
  std::vector<float> wd = ggml::dequantize_rows16(f, w.data(), m, k);
  // Activations as forwards pair them: Q8_0-style for Q4_0/Q8_0, Q8_K for the K-quants.
  bool kquant = tensor_type_info(f).block_elems == 256;
  QuantizedX xq = quantize_x(x, false, kquant ? 256 : 32);
  Spec spec = find_kernel("qgemv_rows16")
                  .make_spec({}, {{"FMT", static_cast<int64_t>(f)}, {"BLOCK_T", bt}});
  auto out = kiln::test::run_quantized_gemm(spec, w, xq, m, k, t);
  auto e = kiln::test::quantized_gemm_error(wd, x, xq, out.jit, out.interpreter, m, k, t,
                                            kiln::test::block_mins(f, blocks, m, k));
  CHECK(e.vs_reference <= 1.0);
  CHECK(e.vs_interpreter <= 1.0);
  CHECK(e.vs_quantized <= 1.0);
}

void check_rows16(TensorType f, int64_t m, int64_t k, int64_t t, int bt) {
  check_rows16(f, m, k, t, bt, weights(f, m, k, 5),
               kiln::test::normal_floats(static_cast<size_t>(t * k), 6));
}

}  // namespace

TEST_CASE("16-row interleaves keep every weight", "[kernels][quant]") {
  const int64_t m = 48, k = 768;
  for (TensorType f : kFormats) {
    INFO(tensor_type_info(f).name);
    std::vector<uint8_t> blocks = weights(f, m, k, 1);
    std::vector<float> want(static_cast<size_t>(m * k));
    ggml::dequantize(f, blocks.data(), m * k, want.data());
    std::vector<uint8_t> packed = ggml::interleave_rows16(f, blocks.data(), m, k);
    REQUIRE(static_cast<int64_t>(packed.size()) == ggml::rows16_bytes(f, m, k));
    std::vector<float> got = ggml::dequantize_rows16(f, packed.data(), m, k);
    int64_t differ = 0;
    for (int64_t i = 0; i < m * k; ++i) differ += got[i] != want[i];
    CHECK(differ == 0);
  }
}

TEST_CASE("16-row interleaves refuse shapes off their tiles and other formats",
          "[kernels][quant][error]") {
  std::vector<uint8_t> blocks(20 * 210);
  for (TensorType f : kFormats) {
    REQUIRE_THROWS_WITH(ggml::interleave_rows16(f, blocks.data(), 20, 256),
                        Catch::Contains("[20, 256]") && Catch::Contains("multiple of 16"));
    REQUIRE_THROWS_WITH(ggml::interleave_rows16(f, blocks.data(), 16, 320),
                        Catch::Contains("multiple of 256"));
  }
  REQUIRE_THROWS_WITH(ggml::interleave_rows16(static_cast<TensorType>(1), blocks.data(), 16, 256),
                      Catch::Contains("no layout for F16"));
}

TEST_CASE("qgemv_rows16 matches the dequantised product", "[kernels][qgemv]") {
  for (TensorType f : kFormats) {
    check_rows16(f, 16, 256, 1, 1);
    check_rows16(f, 32, 256, 1, 1);
    check_rows16(f, 16, 512, 1, 1);
    check_rows16(f, 48, 1024, 1, 1);
    // Token counts off the token block.
    for (int64_t t : {2, 5, 9})
      for (int bt : {1, 4, 6, 8}) check_rows16(f, 32, 512, t, bt);
    // From 12 tokens on Q2_K and Q3_K decode their codes times the scales.
    check_rows16(f, 32, 512, 13, 12);
    check_rows16(f, 16, 256, 30, 16);
    // 37 row blocks run in bands of 16 (expert_tiles.h): two whole bands
    // and a short one, each token tile passing over a band in turn.
    check_rows16(f, 16 * 37, 256, 20, 8);
  }
}

TEST_CASE("qgemv_rows16 keeps its integer sums exact at the formats' extremes",
          "[kernels][qgemv]") {
  // Every x code at 127 in magnitude (x all equal, of either sign) against
  // saturated blocks: the bounds the 16-weight groups' sums are sized by
  // (Q2_K's i16 dots, Q3_K's f32 sums, Q6_K's i32 ones) hold, or these fail.
  const int64_t m = 32, k = 512;
  for (TensorType f : {TensorType::q2_K, TensorType::q3_K, TensorType::q6_K})
    for (float sign : {1.0f, -1.0f})
      for (auto [t, bt] : {std::pair{1, 1}, {5, 4}, {9, 8}, {13, 12}}) {
        INFO("x all " << sign);
        check_rows16(f, m, k, t, bt, saturated_blocks(f, m, k),
                     std::vector<float>(static_cast<size_t>(t * k), sign));
      }
}

TEST_CASE("qgemv_rows16 refuses shapes off its tiles", "[kernels][qgemv][error]") {
  std::vector<uint8_t> w(2368);
  std::vector<int8_t> xq(256);
  std::vector<float> xd(8), y(20);
  std::vector<int32_t> xs(8);
  std::vector<int8_t> xs8(16);
  auto launch = [&](int64_t m, int64_t k) {
    const Spec spec = find_kernel("qgemv_rows16").make_spec();
    kiln::test::runtime().launch(spec, {{"w", w},
                                        {"xq", xq},
                                        {"xd", xd},
                                        {"xs", xs},
                                        {"xs8", xs8},
                                        {"y", y},
                                        {"m", m},
                                        {"k", k},
                                        {"t", 1}});
  };
  REQUIRE_THROWS_WITH(launch(20, 256),
                      Catch::Contains("qgemv_rows16") && Catch::Contains("m a multiple of 16"));
  REQUIRE_THROWS_WITH(launch(16, 128), Catch::Contains("k of 256"));
}
