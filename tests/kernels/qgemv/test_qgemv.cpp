// quantize_q8 and qgemv (every ggml block format) against the host reference
// formats and a double-precision product on the dequantised weights.
//
// Tolerance: support/quantized_x.h's quantized_gemm_error (half an
// activation step per product plus f32 accumulation against the reference;
// 1e-6 of sum_j |w_j x_j| between the JIT and the interpreter, which differ
// only in the reassociated sum over a row's lanes).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>

#include "ir/dtype.h"
#include "kernels/quant/ggml_blocks.h"
#include "kernels/quant/iq_grids.h"
#include "kernels/quant/split_sums.h"
#include "support/quantized_x.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::quantize_x;
using kiln::test::QuantizedX;

namespace {

// quantize_q8's s8 against its s and, for the sums of 16, its q: the low
// 6 bits, then the arithmetic right shift by 6, and the sums of 32 times
// -128 as i32; with Q8_K blocks (`sums256`), each group's i32 sum of its
// 256 codes as well.
void check_split_sums(const QuantizedX& r, bool sums256 = false) {
  for (size_t b = 0; b < r.s.size(); ++b) {
    INFO("block " << b << " sum " << r.s[b]);
    size_t low = static_cast<size_t>(split_sum_low_at(static_cast<int64_t>(b)));
    CHECK(r.s8[low] == (r.s[b] & 63));
    CHECK(r.s8[low + 8] == (r.s[b] >> 6));
    CHECK(r.s8[low] + 64 * r.s8[low + 8] == r.s[b]);
    int32_t neg128 = 0;
    std::memcpy(&neg128, &r.s8[static_cast<size_t>(split_sum_neg128_at(static_cast<int64_t>(b)))],
                4);
    CHECK(neg128 == -128 * r.s[b]);
  }
  for (size_t g = 0; g < r.q.size() / 16; ++g) {
    int sum = 0;
    for (size_t j = 0; j < 16; ++j) sum += r.q[16 * g + j];
    INFO("group of 16 " << g << " sum " << sum);
    size_t low = static_cast<size_t>(split_sum16_low_at(static_cast<int64_t>(g)));
    CHECK(r.s8[low] == (sum & 63));
    CHECK(r.s8[low + 16] == (sum >> 6));
  }
  for (size_t g = 0; sums256 && g < r.q.size() / 256; ++g) {
    int32_t sum = 0, stored = 0;
    for (size_t j = 0; j < 256; ++j) sum += r.q[256 * g + j];
    std::memcpy(&stored, &r.s8[static_cast<size_t>(split_sum256_at(static_cast<int64_t>(g)))], 4);
    INFO("group of 256 " << g);
    CHECK(stored == sum);
  }
}

}  // namespace

TEST_CASE("quantize_q8 matches ggml's Q8_0 rounding", "[kernels][quant]") {
  std::vector<float> x = kiln::test::normal_floats(32 * 40, 1, 2.0f);
  for (int j = 0; j < 32; ++j) x[64 + j] = 0;      // an all-zero block
  for (int j = 0; j < 32; ++j) x[96 + j] = -1.0f;  // the extreme sums, -32 * 127
  for (int j = 0; j < 32; ++j) x[128 + j] = 1.0f;  // and 32 * 127
  QuantizedX jit = quantize_x(x, false), ref = quantize_x(x, true);
  CHECK(jit.q == ref.q);
  CHECK(jit.d == ref.d);
  CHECK(jit.s == ref.s);
  CHECK(jit.s8 == ref.s8);
  REQUIRE(jit.s[3] == -32 * 127);
  check_split_sums(jit);
  // Programs of fewer than 8 blocks store the split sums byte by byte.
  for (int64_t blocks : {1, 2, 4, 16}) {
    INFO("BLOCKS " << blocks);
    QuantizedX other = quantize_x(x, false, 32, blocks);
    CHECK(other.s8 == jit.s8);
    CHECK(other.q == jit.q);
  }
  // ggml's reference quantiser rounds half away from zero where ggml's x86
  // path (and Kiln) round half to even; random floats never land on a tie.
  std::vector<uint8_t> blocks(40 * 34);
  ggml::quantize_q8_0(x.data(), static_cast<int64_t>(x.size()), blocks.data());
  for (int b = 0; b < 40; ++b) {
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      CHECK(jit.q[b * 32 + j] == static_cast<int8_t>(blocks[b * 34 + 2 + j]));
      sum += jit.q[b * 32 + j];
    }
    CHECK(jit.s[b] == sum);
    uint16_t d16;
    std::memcpy(&d16, &blocks[b * 34], 2);
    CHECK(jit.d[b] == f16_bits_to_f32(d16));  // the f16 scale ggml stores
  }
}

TEST_CASE("quantize_q8 with QBLOCK=256 matches ggml's Q8_K", "[kernels][quant]") {
  // ggml's quantize_row_q8_K_ref, restated: m = the first element of largest
  // magnitude, iscale = -127/m, q = nearest_int(iscale x) capped at 127,
  // d = 1/iscale; the 8 per-32 slots repeat d.
  std::vector<float> x = kiln::test::normal_floats(256 * 6, 4, 1.5f);
  for (int j = 0; j < 256; ++j) x[256 + j] = 0;  // an all-zero block
  x[512 + 7] = 9.0f;                             // a positive extreme
  x[768 + 9] = -9.0f;                            // a negative one
  int64_t nb = static_cast<int64_t>(x.size()) / 32;
  for (bool interp : {false, true}) {
    QuantizedX r = quantize_x(x, interp, 256);
    REQUIRE(static_cast<int64_t>(r.s.size()) == nb);
    check_split_sums(r, true);
    for (int b = 0; b < 6; ++b) {
      INFO("block " << b << (interp ? " (interpreter)" : ""));
      float amax = 0, m = 0;
      for (int j = 0; j < 256; ++j)
        if (std::fabs(x[b * 256 + j]) > amax) amax = std::fabs(x[b * 256 + j]), m = x[b * 256 + j];
      float iscale = amax ? -127.0f / m : 0.0f;
      for (int j = 0; j < 256; ++j) {
        int want = std::min(127, static_cast<int>(std::nearbyint(iscale * x[b * 256 + j])));
        CHECK(r.q[b * 256 + j] == want);
      }
      for (int c = 0; c < 8; ++c) {
        CHECK(r.d[b * 8 + c] == (amax ? 1.0f / iscale : 0.0f));
        int32_t sum = 0;
        for (int j = 0; j < 32; ++j) sum += r.q[b * 256 + c * 32 + j];
        CHECK(r.s[b * 8 + c] == sum);
      }
    }
  }
}

namespace {

void check_qgemv(int fmt, int64_t m, int64_t k, int64_t t, int bm, int bt) {
  INFO("BLOCK_M=" << bm << " BLOCK_T=" << bt);
  kiln::test::check_ggml_gemm(
      find_kernel("qgemv").make_spec({}, {{"FMT", fmt}, {"BLOCK_M", bm}, {"BLOCK_T", bt}}), m, k,
      t);
}

// Every block format at the row and token blocks' extremes (1 and 8: one
// row or token a program, and several with a partial last block); the
// middle sizes, the same code with another trip count, under
// `test_kernels "[long]"`. Each (format, block) is a JIT compile.
void every_format(const std::vector<int>& blocks) {
  struct Dims {
    int64_t m, k;
  };
  for (const TensorTypeInfo& f : block_types())
    for (Dims s : {Dims{1, 256}, Dims{7, 512}, Dims{33, 4096}, Dims{130, 256}})
      for (int bm : blocks) check_qgemv(static_cast<int>(f.type), s.m, s.k, 1, bm, 1);
}

void prompt_gemm(const std::vector<int>& blocks) {
  // Token counts off the token block, and rows off the row block.
  for (const TensorTypeInfo& f : block_types())
    for (int64_t t : {2, 5, 9})
      for (int bt : blocks) check_qgemv(static_cast<int>(f.type), 19, 512, t, 8, bt);
}

}  // namespace

TEST_CASE("qgemv matches the dequantised product for every block format", "[kernels][qgemv]") {
  every_format({1, 8});
}

TEST_CASE("qgemv matches the dequantised product at BLOCK_M 4", "[kernels][qgemv][.long]") {
  every_format({4});
}

TEST_CASE("qgemv one-row decode of Q4_0/Q8_0 with a partial last step", "[kernels][qgemv]") {
  // One row per program takes 8 blocks per step: k = 800 leaves 1 block
  // over, k = 96 has no full step at all.
  for (int fmt : {2, 8})
    for (int64_t k : {96, 800, 1024})
      for (int64_t t : {1, 3}) check_qgemv(fmt, 5, k, t, 1, 1);
}

TEST_CASE("qgemv over several tokens (prompt GEMM) matches per token", "[kernels][qgemv]") {
  prompt_gemm({1, 8});
}

TEST_CASE("qgemv over several tokens at BLOCK_T 4", "[kernels][qgemv][.long]") { prompt_gemm({4}); }

TEST_CASE("qgemv refuses k off the block size", "[kernels][qgemv][error]") {
  std::vector<uint8_t> w(34 * 4);
  std::vector<int8_t> xq(40);
  std::vector<float> xd(2), y(2);
  std::vector<int32_t> xs(2);
  REQUIRE_THROWS_WITH(
      kiln::test::runtime().launch(
          find_kernel("qgemv").make_spec(),
          {{"w", w}, {"xq", xq}, {"xd", xd}, {"xs", xs}, {"y", y}, {"m", 2}, {"k", 40}, {"t", 1}}),
      Catch::Contains("k = 40 is not a multiple of the 32-weight block"));
}
