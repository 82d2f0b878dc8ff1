// qgemm_tiles (every ggml block format) against the double-precision
// product on the dequantised weights, through the JIT and the interpreter.
//
// Tolerance: support/quantized_x.h's quantized_gemm_error, as qgemv's (the
// integer tile dots are exact; f32 scaling and accumulation per block).
#include <catch2/catch.hpp>

#include "kernels/quant/ggml_blocks.h"
#include "kernels/registry.h"
#include "support/quantized_x.h"

using namespace kiln;

namespace {

Spec tiles_spec(int fmt, int bm, int bt) {
  return find_kernel("qgemm_tiles").make_spec({}, {{"FMT", fmt}, {"BLOCK_M", bm}, {"BLOCK_T", bt}});
}

}  // namespace

TEST_CASE("qgemm_tiles matches the dequantised product for every block format",
          "[kernels][qgemv]") {
  // The smallest mma tiles (16 rows, 8 tokens; 32 tile rows for the
  // 16-weight groups), rows and tokens off them: 19 rows, 9 tokens.
  for (const TensorTypeInfo& f : block_types())
    kiln::test::check_ggml_gemm(tiles_spec(static_cast<int>(f.type), 16, 8), 19, 512, 9);
}

TEST_CASE("qgemm_tiles at a larger tile over a prompt", "[kernels][qgemv]") {
  kiln::test::check_ggml_gemm(tiles_spec(12, 32, 16), 70, 512, 37);
}

TEST_CASE("qgemm_tiles refuses k off the block size", "[kernels][qgemv][error]") {
  Spec spec = tiles_spec(12, 16, 8);
  std::vector<uint8_t> w(144 * 2);
  std::vector<int8_t> xq(300);
  std::vector<float> xd(10), y(2);
  std::vector<int32_t> xs(10);
  REQUIRE_THROWS_WITH(
      kiln::test::runtime().launch(
          spec,
          {{"w", w}, {"xq", xq}, {"xd", xd}, {"xs", xs}, {"y", y}, {"m", 2}, {"k", 300}, {"t", 1}}),
      Catch::Contains("qgemm_tiles") && Catch::Contains("k = 300") &&
          Catch::Contains("256-weight block"));
}
