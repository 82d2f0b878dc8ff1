// attention_prefill_tiles (the tile-dot prefill the GPU policy runs) against
// a double-precision softmax(q K^T * scale + mask) V, compiled and through
// the interpreter, over f16, bf16 and q8_0 caches, head sizes 64, 128 and 256,
// GQA, prompts off the query block and after an existing cache, windows,
// sinks and a paged cache.
//
// Tolerance: q (times scale * log2 e) and the weights P are rounded to the
// cache's dtype before their dots, as FlashAttention rounds them. With q,
// K and V in [-1, 1], a score's error is at most 2^-11 (f16) or 2^-8 (bf16)
// of sum_d |q_d k_d| scale <= sqrt(HEAD_DIM), and a weight's own rounding
// adds that unit again; outputs are convex combinations of V rows. At
// HEAD_DIM 64 that bounds the error by 4.4e-3 (f16) and 3.5e-2 (bf16); the
// tolerances are 4e-3 and 3e-2, and the worst errors observed are below
// 4e-4 and 4e-3 (typical errors are far below the worst case's sum). Over a
// q8_0 cache the scores are exact i32 dots of codes times f32 scales (as
// the reference reads them), and P and the V rows are rounded to f16:
// at most 2 * 2^-11 relative on a convex combination; 4e-3 too.
#include <catch2/catch.hpp>

#include "attention_case.h"

using namespace kiln;
using kiln::test::AttentionCase;

namespace {
const char* const kKernel = "attention_prefill_tiles";
double tolerance(DType kv) { return kv == DType::bf16 ? 3e-2 : 4e-3; }
}  // namespace

TEST_CASE("attention_prefill_tiles matches a double-precision reference", "[kernels][attention]") {
  for (DType kv : {DType::f16, DType::bf16, DType::i8})
    kiln::test::check_attention_sweep(kKernel, tolerance(kv), {}, {kv});
}

namespace {
void windows_sinks_pages_wide(DType kv) {
  {
    AttentionCase c{.kv = kv, .head_dim = 64, .n_heads = 8, .n_kv_heads = 2};
    c.n_tokens = 37;
    c.pos0 = 30;
    c.kv_len = 70;
    c.window = 20;
    kiln::test::check_attention(kKernel, c, tolerance(kv));
    c.sinks = true;
    kiln::test::check_attention(kKernel, c, tolerance(kv));
    c.window = 0;
    c.page = 32;
    kiln::test::check_attention(kKernel, c, tolerance(kv), {{"BLOCK_M", 32}});
    AttentionCase wide{.kv = kv, .head_dim = 256, .n_heads = 2, .n_kv_heads = 1};
    wide.n_tokens = 9;
    wide.pos0 = 20;
    wide.kv_len = 29;
    kiln::test::check_attention(kKernel, wide, tolerance(kv));
  }
}
}  // namespace

// f16 in CI; bf16's tiles differ only in the element type (`test_kernels
// "[long]"`): each variant is a JIT compile of seconds.
TEST_CASE("attention_prefill_tiles with windows, sinks, pages and wide heads",
          "[kernels][attention]") {
  windows_sinks_pages_wide(DType::f16);
}

TEST_CASE("attention_prefill_tiles with windows, sinks, pages and wide heads over bf16",
          "[kernels][attention][.long]") {
  windows_sinks_pages_wide(DType::bf16);
}

TEST_CASE("attention_prefill_tiles matches the interpreter", "[kernels][attention]") {
  for (DType kv : {DType::f16, DType::bf16, DType::i8}) {
    AttentionCase c{.kv = kv, .head_dim = 64, .n_heads = 4, .n_kv_heads = 1};
    c.n_tokens = 7;
    c.pos0 = 11;
    c.kv_len = 18;
    kiln::test::check_attention_interpreted(kKernel, c, tolerance(kv), {});
  }
}
