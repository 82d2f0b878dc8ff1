// ggml block formats against an independent implementation (vectors from
// the gguf package, see make_vectors.py) and round-trip error bounds.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ggml_kquant_vectors.h"
#include "ggml_vectors.h"
#include "ir/error.h"
#include "kernels/quant/ggml_blocks.h"

using namespace kiln;
using namespace kiln::ggml;
namespace v = kiln::test::ggml_vectors;

namespace {
std::vector<float> input() {
  std::vector<float> x(std::size(v::kInput));
  std::memcpy(x.data(), v::kInput, sizeof v::kInput);
  return x;
}
std::vector<float> floats(const uint32_t* bits, size_t n) {
  std::vector<float> x(n);
  std::memcpy(x.data(), bits, n * 4);
  return x;
}
}  // namespace

TEST_CASE("Q8_0 and Q4_0 quantise bit-exactly like ggml", "[kernels][quant]") {
  std::vector<float> x = input();
  std::vector<uint8_t> q8(x.size() / 32 * 34), q4(x.size() / 32 * 18);
  quantize_q8_0(x.data(), static_cast<int64_t>(x.size()), q8.data());
  quantize_q4_0(x.data(), static_cast<int64_t>(x.size()), q4.data());
  CHECK(q8 == std::vector<uint8_t>(std::begin(v::kQ8_0), std::end(v::kQ8_0)));
  CHECK(q4 == std::vector<uint8_t>(std::begin(v::kQ4_0), std::end(v::kQ4_0)));
}

TEST_CASE("Q4_1, Q5_0 and Q5_1 quantise and dequantise bit-exactly like ggml",
          "[kernels][quant]") {
  // The same six blocks as Q4_0's: random, all zero, ties, large values.
  std::vector<float> x = input();
  const int64_t n = static_cast<int64_t>(x.size());
  struct Case {
    TensorType t;
    const uint8_t* want;
    size_t bytes;
    const uint32_t* values;
  } cases[] = {{TensorType::q4_1, v::kQ4_1, sizeof(v::kQ4_1), v::kQ4_1Values},
               {TensorType::q5_0, v::kQ5_0, sizeof(v::kQ5_0), v::kQ5_0Values},
               {TensorType::q5_1, v::kQ5_1, sizeof(v::kQ5_1), v::kQ5_1Values}};
  for (const Case& c : cases) {
    INFO(tensor_type_info(c.t).name);
    std::vector<uint8_t> q(static_cast<size_t>(n / 32 * tensor_type_info(c.t).block_bytes));
    REQUIRE(q.size() == c.bytes);
    quantize(c.t, x.data(), n, q.data());
    CHECK(q == std::vector<uint8_t>(c.want, c.want + c.bytes));
    std::vector<float> y(x.size());
    dequantize(c.t, c.want, n, y.data());
    CHECK(y == floats(c.values, x.size()));
  }
}

TEST_CASE("the K, codebook and lattice formats dequantise like ggml", "[kernels][quant]") {
  // Random blocks (MXFP4: one per scale byte 0-254, some overflowing to inf).
  const struct {
    TensorType t;
    const uint8_t* blocks;
    const uint32_t* values;
    size_t n;
  } cases[] = {{TensorType::q2_K, v::kQ2_KBlocks, v::kQ2_KValues, std::size(v::kQ2_KValues)},
               {TensorType::q3_K, v::kQ3_KBlocks, v::kQ3_KValues, std::size(v::kQ3_KValues)},
               {TensorType::q4_K, v::kQ4_KBlocks, v::kQ4_KValues, std::size(v::kQ4_KValues)},
               {TensorType::q5_K, v::kQ5_KBlocks, v::kQ5_KValues, std::size(v::kQ5_KValues)},
               {TensorType::q6_K, v::kQ6_KBlocks, v::kQ6_KValues, std::size(v::kQ6_KValues)},
               {TensorType::iq4_nl, v::kIQ4_NLBlocks, v::kIQ4_NLValues, std::size(v::kIQ4_NLValues)},
               {TensorType::iq4_xs, v::kIQ4_XSBlocks, v::kIQ4_XSValues, std::size(v::kIQ4_XSValues)},
               {TensorType::mxfp4, v::kMXFP4Blocks, v::kMXFP4Values, std::size(v::kMXFP4Values)},
               {TensorType::iq2_xxs, v::kIQ2_XXSBlocks, v::kIQ2_XXSValues,
                std::size(v::kIQ2_XXSValues)},
               {TensorType::iq2_xs, v::kIQ2_XSBlocks, v::kIQ2_XSValues, std::size(v::kIQ2_XSValues)},
               {TensorType::iq2_s, v::kIQ2_SBlocks, v::kIQ2_SValues, std::size(v::kIQ2_SValues)},
               {TensorType::iq3_xxs, v::kIQ3_XXSBlocks, v::kIQ3_XXSValues,
                std::size(v::kIQ3_XXSValues)},
               {TensorType::iq3_s, v::kIQ3_SBlocks, v::kIQ3_SValues, std::size(v::kIQ3_SValues)}};
  for (const auto& c : cases) {
    INFO(tensor_type_info(c.t).name);
    std::vector<float> y(c.n);
    dequantize(c.t, c.blocks, static_cast<int64_t>(c.n), y.data());
    CHECK(std::memcmp(y.data(), c.values, c.n * 4) == 0);
  }
}

TEST_CASE("quantise -> dequantise stays within each format's step", "[kernels][quant]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0, 1);
  std::vector<float> x(32 * 64), y(x.size());
  for (float& f : x) f = d(rng);
  for (TensorType t : {TensorType::q8_0, TensorType::q4_0}) {
    INFO(tensor_type_info(t).name);
    std::vector<uint8_t> q(x.size() / 32 * tensor_type_info(t).block_bytes);
    if (t == TensorType::q8_0)
      quantize_q8_0(x.data(), static_cast<int64_t>(x.size()), q.data());
    else
      quantize_q4_0(x.data(), static_cast<int64_t>(x.size()), q.data());
    dequantize(t, q.data(), static_cast<int64_t>(x.size()), y.data());
    for (size_t b = 0; b < x.size() / 32; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
      // Q8_0: half a step (amax/127). Q4_0 maps the signed max to -8, so the
      // other end clips at +7: up to a whole step (amax/8). Plus the f16
      // rounding of the scale.
      float bound = t == TensorType::q8_0 ? amax / 127 * 0.5f : amax / 8;
      for (int j = 0; j < 32; ++j)
        CHECK(std::fabs(y[b * 32 + j] - x[b * 32 + j]) <= bound + amax * 2e-3f);
    }
  }
}

TEST_CASE("block formats reject bad sizes and unknown type ids", "[kernels][quant][error]") {
  std::vector<float> x(33);
  std::vector<uint8_t> q(64);
  REQUIRE_THROWS_WITH(quantize_q8_0(x.data(), 33, q.data()),
                      Catch::Contains("33 elements is not a multiple of the 32-element block"));
  REQUIRE_THROWS_WITH(block_type_info(9),
                      Catch::Contains("type id 9 is not a block format Kiln supports"));
  REQUIRE_THROWS_WITH(block_type_info(1), Catch::Contains("Q4_K=12"));  // F16: no blocks
  REQUIRE_THROWS_WITH(quantize(TensorType::iq2_xs, x.data(), 0, q.data()),
                      Catch::Contains("no quantiser for IQ2_XS"));
  CHECK(block_type_info(12).block_bytes == 144);
  CHECK(find_tensor_type_named("q4_k") == &tensor_type_info(TensorType::q4_K));
  CHECK(find_tensor_type_named("IQ4_XS")->block_bytes == 136);
  CHECK(find_tensor_type_named("q4_k_m") == nullptr);
}

TEST_CASE("Q4_K quantises bit-exactly like ggml's reference quantiser", "[kernels][quant]") {
  namespace q = kiln::test::ggml_kquants;
  std::vector<float> x(std::size(q::kInput));
  std::memcpy(x.data(), q::kInput, sizeof q::kInput);
  std::vector<uint8_t> blocks(x.size() / 256 * 144);
  quantize_q4_k(x.data(), static_cast<int64_t>(x.size()), blocks.data());
  std::vector<uint8_t> expect(std::begin(q::kQ4K), std::end(q::kQ4K));
  for (size_t b = 0; b < blocks.size() / 144; ++b) {
    INFO("block " << b);
    CHECK(std::vector<uint8_t>(blocks.begin() + b * 144, blocks.begin() + (b + 1) * 144) ==
          std::vector<uint8_t>(expect.begin() + b * 144, expect.begin() + (b + 1) * 144));
  }
  // And the round trip stays within one quantisation step of each 32-weight
  // sub-block (its range / 15): the weighted least-squares fit may trade
  // the extremes for the bulk, and the scales themselves are 6-bit.
  std::vector<float> y(x.size());
  dequantize(TensorType::q4_K, blocks.data(), static_cast<int64_t>(x.size()), y.data());
  for (size_t sub = 0; sub < x.size() / 32; ++sub) {
    float lo = 0, hi = 0;
    for (int j = 0; j < 32; ++j) {
      lo = std::min(lo, x[sub * 32 + j]);
      hi = std::max(hi, x[sub * 32 + j]);
    }
    for (int j = 0; j < 32; ++j)
      CHECK(std::fabs(y[sub * 32 + j] - x[sub * 32 + j]) <= (hi - lo) / 15 + 1e-6f);
  }
}

TEST_CASE("Q6_K quantises bit-exactly like ggml's reference quantiser", "[kernels][quant]") {
  namespace q = kiln::test::ggml_kquants;
  std::vector<float> x(std::size(q::kInput));
  std::memcpy(x.data(), q::kInput, sizeof q::kInput);
  std::vector<uint8_t> blocks(x.size() / 256 * 210);
  quantize_q6_k(x.data(), static_cast<int64_t>(x.size()), blocks.data());
  for (size_t b = 0; b < blocks.size() / 210; ++b) {
    INFO("block " << b);
    CHECK(std::vector<uint8_t>(blocks.begin() + b * 210, blocks.begin() + (b + 1) * 210) ==
          std::vector<uint8_t>(q::kQ6K + b * 210, q::kQ6K + (b + 1) * 210));
  }
  // Round trip: within one 6-bit step of each 16-weight group (amax / 32 or so,
  // plus the 8-bit rounding of the group scale).
  std::vector<float> y(x.size());
  dequantize(TensorType::q6_K, blocks.data(), static_cast<int64_t>(x.size()), y.data());
  for (size_t g = 0; g < x.size() / 16; ++g) {
    float amax = 0;
    for (int j = 0; j < 16; ++j) amax = std::max(amax, std::fabs(x[g * 16 + j]));
    for (int j = 0; j < 16; ++j)
      CHECK(std::fabs(y[g * 16 + j] - x[g * 16 + j]) <= amax / 16 + 1e-6f);
  }
}

TEST_CASE("Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS and MXFP4 quantise bit-exactly like ggml",
          "[kernels][quant]") {
  namespace q = kiln::test::ggml_kquants;
  std::vector<float> x(std::size(q::kInput));
  std::memcpy(x.data(), q::kInput, sizeof q::kInput);
  const int64_t n = static_cast<int64_t>(x.size());
  // Round-trip bounds per 16-weight group, in steps of the group's range:
  // the fits trade the extremes for the bulk (Q2_K's absolute-error fit
  // most of all) and the scales are 4- or 6-bit.
  const struct {
    TensorType t;
    const uint8_t* want;
    size_t bytes;
    float steps;  // allowed error in units of range / levels
    int levels;
  } cases[] = {{TensorType::q2_K, q::kQ2K, sizeof q::kQ2K, 1.5f, 3},
               {TensorType::q3_K, q::kQ3K, sizeof q::kQ3K, 1.0f, 7},
               {TensorType::q5_K, q::kQ5K, sizeof q::kQ5K, 1.0f, 31},
               // The codebooks' widest gap (-127 .. -104) is 23 of 240 levels
               // across the range: under 2 steps of a 15-level grid.
               {TensorType::iq4_nl, q::kIQ4NL, sizeof q::kIQ4NL, 2.0f, 15},
               {TensorType::iq4_xs, q::kIQ4XS, sizeof q::kIQ4XS, 2.0f, 15},
               // e2m1's top gap (4 .. 6 of 12) and e = floor(log2 max) - 2
               // rounding the scale down by up to 2x: a quarter of the range.
               {TensorType::mxfp4, q::kMXFP4, sizeof q::kMXFP4, 1.0f, 4}};
  for (const auto& c : cases) {
    const int bb = tensor_type_info(c.t).block_bytes;
    INFO(tensor_type_info(c.t).name);
    std::vector<uint8_t> blocks(x.size() / tensor_type_info(c.t).block_elems * bb);
    REQUIRE(blocks.size() == c.bytes);
    quantize(c.t, x.data(), n, blocks.data());
    for (size_t b = 0; b < blocks.size() / bb; ++b) {
      INFO("block " << b);
      CHECK(std::vector<uint8_t>(blocks.begin() + b * bb, blocks.begin() + (b + 1) * bb) ==
            std::vector<uint8_t>(c.want + b * bb, c.want + (b + 1) * bb));
    }
    std::vector<float> y(x.size());
    dequantize(c.t, blocks.data(), n, y.data());
    for (size_t g = 0; g < x.size() / 16; ++g) {
      float lo = 0, hi = 0;
      for (int j = 0; j < 16; ++j) {
        lo = std::min(lo, x[g * 16 + j]);
        hi = std::max(hi, x[g * 16 + j]);
      }
      for (int j = 0; j < 16; ++j)
        CHECK(std::fabs(y[g * 16 + j] - x[g * 16 + j]) <= c.steps * (hi - lo) / c.levels + 1e-6f);
    }
  }
}
