// attention_decode against a double-precision softmax(q K^T * scale + causal
// mask) V and against the interpreter, over cache dtypes, head sizes, GQA
// ratios, token counts, positions and block sizes.
//
// Tolerance: outputs are convex combinations of V rows in [-1, 1], so the
// error is absolute. Scores are f32 FMA chains over HEAD_DIM (q in [-3, 3]:
// |s| <~ 10, rounding ~1e-6 in practice), exp2 adds ~2.5e-7 relative, and
// l and the accumulator are f32 sums over at most kv_len terms; 2e-5 leaves
// a wide margin over the observed ~1e-6. The interpreter runs the same ops
// in the same order but rounds every product and sum separately where the
// JIT contracts them into FMAs, so it agrees within the same bound.
#include <catch2/catch.hpp>

#include "attention_case.h"

using namespace kiln;
using kiln::test::AttentionCase;

namespace {
constexpr double kAtol = 2e-5;
const char* const kKernel = "attention_decode";
}  // namespace

TEST_CASE("attention_decode matches a double-precision reference", "[kernels][attention]") {
  kiln::test::check_attention_sweep(kKernel, kAtol);
}

TEST_CASE("attention_decode built for a 256-bit target (8 lanes, 8-key cache blocks)",
          "[kernels][attention]") {
  // The tile shapes and the K cache layout follow the spec's target; the
  // code runs on this host whatever it was shaped for.
  kiln::test::check_attention_sweep(kKernel, kAtol, TargetDesc{256, 16, 1});
}

TEST_CASE("attention_decode takes a GQA group's heads as its target's registers allow",
          "[kernels][attention]") {
  // BLOCK_G for n_heads / n_kv_heads query heads per KV head: up to 8 where
  // the score vectors fill a quarter of the registers (AVX-512), 4 on AVX2,
  // NEON (two registers per 8-key block) and CUDA; AURA 8 with 8-bit keys,
  // else 4; never more than the group, rounded up to a power of two.
  const KernelDef& d = find_kernel(kKernel);
  auto block_g = [&](TargetDesc t, int64_t heads, int64_t kv_heads, DType kv = DType::f16,
                     int64_t kbits = 8) {
    std::map<std::string, int64_t> c;
    if (kv == DType::u32) c = {{"KBITS", kbits}, {"VBITS", 4}};
    Spec s = d.make_spec({{"KV", kv}}, c);
    s.target = t;
    ScalarArgs a;
    a.set_int("n_heads", heads);
    a.set_int("n_kv_heads", kv_heads);
    return d.shape_heuristic(s, a).at("BLOCK_G");
  };
  const TargetDesc avx512{}, avx2{256, 16, 1}, neon{128, 32, 1}, cuda{1024, 255, 32};
  CHECK(block_g(avx512, 32, 4) == 8);
  CHECK(block_g(avx512, 64, 4) == 8);
  CHECK(block_g(avx512, 32, 8) == 4);
  CHECK(block_g(avx512, 24, 8) == 4);  // a group of 3
  CHECK(block_g(avx512, 32, 4, DType::i8) == 8);
  CHECK(block_g(avx2, 32, 4) == 4);
  CHECK(block_g(neon, 32, 4) == 4);
  CHECK(block_g(cuda, 32, 4) == 4);
  CHECK(block_g(avx512, 32, 4, DType::u32, 8) == 8);
  CHECK(block_g(avx512, 32, 4, DType::u32, 4) == 4);
}

TEST_CASE("attention_decode rescales over a long cache", "[kernels][attention]") {
  // Many key blocks, and scores spread wide enough that the running max keeps moving.
  for (DType kv : {DType::f16, DType::f32, DType::i8}) {
    AttentionCase c{.kv = kv, .head_dim = 128, .n_heads = 8, .n_kv_heads = 2};
    c.pos0 = 1000;
    c.kv_len = 1001;
    c.q_range = 8;
    kiln::test::check_attention(kKernel, c, kAtol);
  }
}

TEST_CASE("attention_decode with other block sizes", "[kernels][attention]") {
  // BLOCK_G below the group splits it over programs (and need not divide it); above it,
  // rows of the program go unused.
  for (int64_t bg : {1, 2, 4, 8})
    for (auto [nh, nkv] : {std::pair{8, 2}, std::pair{12, 4}}) {
      INFO("BLOCK_G=" << bg);
      AttentionCase c{.kv = DType::f16, .head_dim = 64, .n_heads = nh, .n_kv_heads = nkv};
      c.n_tokens = 3;
      c.pos0 = 70;
      c.kv_len = 75;
      kiln::test::check_attention(kKernel, c, kAtol, {{"BLOCK_G", bg}});
    }
}

TEST_CASE("attention_decode matches the interpreter", "[kernels][attention]") {
  // Small, as the interpreter runs element by element. V holds exactly kv_len rows, so an
  // unmasked read past them is an interpreter error; K's block padding holds NaN.
  for (DType kv : {DType::f16, DType::f32, DType::i8})
    for (int64_t nt : {1, 3}) {
      AttentionCase c{.kv = kv, .head_dim = 64, .n_heads = 8, .n_kv_heads = 2};
      c.n_tokens = nt;
      c.pos0 = 20;
      c.kv_len = 20 + nt;
      kiln::test::check_attention_interpreted(kKernel, c, kAtol, {{"BLOCK_G", 4}});
    }
}
