// attention_prefill against a double-precision softmax(q K^T * scale + causal
// mask) V and against the interpreter, over cache dtypes, head sizes, GQA
// ratios, token counts off the query block, positions (a prompt continuing
// after an existing cache) and block sizes.
//
// Tolerance: as for attention_decode (test_attention_decode.cpp): absolute,
// since outputs are convex combinations of V rows in [-1, 1]; f32 score
// FMAs over HEAD_DIM, exp2 at ~2.5e-7 relative and f32 sums over at most
// kv_len terms stay far below 2e-5 (observed ~1e-6), and the interpreter
// differs from the JIT only by FMA contraction.
#include <catch2/catch.hpp>

#include "attention_case.h"

using namespace kiln;
using kiln::test::AttentionCase;

namespace {
constexpr double kAtol = 2e-5;
const char* const kKernel = "attention_prefill";
}  // namespace

TEST_CASE("attention_prefill matches a double-precision reference", "[kernels][attention]") {
  kiln::test::check_attention_sweep(kKernel, kAtol);
}

TEST_CASE("attention_prefill built for a 256-bit target (8 lanes, 8-key cache blocks)",
          "[kernels][attention]") {
  // The tile shapes and the K cache layout follow the spec's target; the
  // code runs on this host whatever it was shaped for.
  kiln::test::check_attention_sweep(kKernel, kAtol, TargetDesc{256, 16, 1});
}

TEST_CASE("attention_prefill rescales over a long cache", "[kernels][attention]") {
  // A short chunk after a long cache: many unmasked key blocks before the diagonal, with
  // scores spread wide enough that the running max keeps moving.
  for (DType kv : {DType::f16, DType::f32}) {
    AttentionCase c{.kv = kv, .head_dim = 128, .n_heads = 4, .n_kv_heads = 1};
    c.n_tokens = 5;
    c.pos0 = 700;
    c.kv_len = 705;
    c.q_range = 8;
    kiln::test::check_attention(kKernel, c, kAtol);
  }
}

TEST_CASE("attention_prefill with other block sizes", "[kernels][attention]") {
  for (int64_t bm : {1, 2, 8, 32}) {
    INFO("BLOCK_M=" << bm);
    AttentionCase c{.kv = DType::f16, .head_dim = 64, .n_heads = 8, .n_kv_heads = 2};
    c.n_tokens = 37;
    c.pos0 = 30;
    c.kv_len = 70;
    kiln::test::check_attention(kKernel, c, kAtol, {{"BLOCK_M", bm}});
  }
}

TEST_CASE("attention_prefill matches the interpreter", "[kernels][attention]") {
  // Small, as the interpreter runs element by element. V holds exactly kv_len rows, so an
  // unmasked read past them is an interpreter error; K's block padding holds NaN.
  for (DType kv : {DType::f16, DType::f32, DType::i8})
    for (auto [nt, pos0] : {std::pair{7, 0}, std::pair{6, 11}}) {
      AttentionCase c{.kv = kv, .head_dim = 64, .n_heads = 4, .n_kv_heads = 1};
      c.n_tokens = nt;
      c.pos0 = pos0;
      c.kv_len = pos0 + nt;
      kiln::test::check_attention_interpreted(kKernel, c, kAtol, {{"BLOCK_M", 4}});
    }
}
