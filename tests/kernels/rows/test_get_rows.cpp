// get_rows against the host references: float tables copied exactly, ggml
// blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K) equal bit for bit to ggml::dequantize
// (itself checked against the gguf package and ggml's C), through the JIT
// and the interpreter; bad formats and short tables refused.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>

#include "ir/dtype.h"
#include "ir/error.h"
#include "kernels/quant/ggml_blocks.h"
#include "kernels/quant/iq_grids.h"
#include "support/runtime_fixture.h"

using namespace kiln;

namespace {

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> x(n);
  for (float& v : x) v = nd(rng);
  return x;
}

// Runs get_rows on the JIT and in the interpreter; both results.
std::pair<std::vector<float>, std::vector<float>> lookup(DType w, int64_t fmt, void* table,
                                                         int64_t table_elems, int64_t table_rows,
                                                         std::vector<int32_t> ids, int64_t n,
                                                         float scale = 1) {
  int64_t rows = static_cast<int64_t>(ids.size());
  std::vector<float> jit(rows * n, -1.0f), ref(rows * n, -1.0f);
  Spec spec = find_kernel("get_rows").make_spec({{"W", w}}, {{"FMT", fmt}});
  auto args = [&](std::vector<float>& out) {
    return LaunchArgs{{"table", LaunchArg(table, table_elems, w)},
                      {"ids", ids},
                      {"out", out},
                      {"n", n},
                      {"rows", rows},
                      {"scale", scale},
                      {"table_rows", table_rows}};
  };
  test::runtime().launch(spec, args(jit));
  test::runtime().interpret(spec, args(ref));
  return {jit, ref};
}

}  // namespace

TEST_CASE("get_rows copies float rows exactly", "[kernels][rows]") {
  const int64_t V = 9, n = 300;
  std::vector<float> table = random_floats(V * n, 1);
  std::vector<uint16_t> half(V * n);
  for (size_t i = 0; i < half.size(); ++i) half[i] = f32_to_f16_bits(table[i]);
  std::vector<int32_t> ids = {8, 0, 3, 3};
  auto [f32_jit, f32_ref] = lookup(DType::f32, 0, table.data(), V * n, V, ids, n);
  auto [f16_jit, f16_ref] = lookup(DType::f16, 0, half.data(), V * n, V, ids, n);
  for (size_t r = 0; r < ids.size(); ++r)
    for (int64_t c = 0; c < n; ++c) {
      size_t src = static_cast<size_t>(ids[r] * n + c), dst = r * n + c;
      CHECK(f32_jit[dst] == table[src]);
      CHECK(f32_ref[dst] == table[src]);
      CHECK(f16_jit[dst] == f16_bits_to_f32(half[src]));
      CHECK(f16_ref[dst] == f16_bits_to_f32(half[src]));
    }
}

TEST_CASE("get_rows scales rows as one f32 product", "[kernels][rows]") {
  // Gemma's embedding scale: llama.cpp multiplies the looked-up f32 row by
  // sqrt(n_embd) in f32, so the product must round the same way.
  const int64_t V = 5, n = 70;
  std::vector<float> table = random_floats(V * n, 7);
  const float scale = std::sqrt(1152.0f);
  std::vector<int32_t> ids = {4, 1};
  auto [jit, ref] = lookup(DType::f32, 0, table.data(), V * n, V, ids, n, scale);
  for (size_t r = 0; r < ids.size(); ++r)
    for (int64_t c = 0; c < n; ++c) {
      float want = table[static_cast<size_t>(ids[r] * n + c)] * scale;
      CHECK(jit[r * n + c] == want);
      CHECK(ref[r * n + c] == want);
    }
}

TEST_CASE("get_rows dequantises ggml blocks as ggml does", "[kernels][rows]") {
  for (const TensorTypeInfo& f : block_types()) {
    const TensorType qt = f.type;
    INFO(f.name);
    const int64_t V = 6, n = 512, row_bytes = n / f.block_elems * f.block_bytes;
    std::vector<float> w = random_floats(V * n, 2);
    std::vector<uint8_t> blocks(V * row_bytes);
    ggml::sample_blocks(qt, w.data(), V * n, 4, blocks.data());
    std::vector<int32_t> ids = {5, 1, 1, 0};
    auto [jit, ref] =
        lookup(DType::u8, static_cast<int64_t>(qt), blocks.data(), V * row_bytes, V, ids, n);
    std::vector<float> want(n);
    for (size_t r = 0; r < ids.size(); ++r) {
      ggml::dequantize(qt, blocks.data() + ids[r] * row_bytes, n, want.data());
      CHECK(std::memcmp(&jit[r * n], want.data(), n * sizeof(float)) == 0);
      CHECK(std::memcmp(&ref[r * n], want.data(), n * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("get_rows refuses formats and tables that do not fit", "[kernels][rows][error]") {
  const KernelDef& def = find_kernel("get_rows");
  REQUIRE_THROWS_WITH(test::runtime().compile(def.make_spec({{"W", DType::u8}}, {{"FMT", 0}})),
                      Catch::Contains("W=u8 needs a ggml block FMT"));
  REQUIRE_THROWS_WITH(test::runtime().compile(def.make_spec({{"W", DType::u8}}, {{"FMT", 4}})),
                      Catch::Contains("4"));
  std::vector<uint8_t> table(10 * 34);
  std::vector<int32_t> ids = {0};
  std::vector<float> out(64);
  Spec q8 = def.make_spec({{"W", DType::u8}}, {{"FMT", 8}});
  auto args = [&](int64_t n, int64_t table_rows) {
    return LaunchArgs{{"table", table},
                      {"ids", ids},
                      {"out", out},
                      {"n", n},
                      {"rows", int64_t{1}},
                      {"scale", 1.0},
                      {"table_rows", table_rows}};
  };
  REQUIRE_THROWS_WITH(test::runtime().launch(q8, args(64, 10)),
                      Catch::Contains("buffer 'table' holds 340 elements, the launch needs 680"));
  REQUIRE_THROWS_WITH(test::runtime().launch(q8, args(40, 1)),
                      Catch::Contains("row length 40 is not a multiple of 32 (Q8_0)"));
}
