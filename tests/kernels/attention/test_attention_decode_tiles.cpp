// attention_decode_tiles (split-K decode as tile dots, the GPU policy's
// decode over f16, bf16 and q8_0 caches), then attention_decode_merge, against a
// double-precision softmax(q K^T * scale + mask) V, compiled and through
// the interpreter: head sizes 64, 128 and 256, groups smaller and larger
// than the tile's BLOCK_G rows, one slice and many, several query tokens,
// windows, sinks and a paged cache.
//
// Tolerance as attention_prefill_tiles' (test_attention_prefill_tiles.cpp):
// q and the weights P are rounded to the cache's dtype before their dots,
// which bounds the error at HEAD_DIM 64 by 4.4e-3 (f16) and 3.5e-2 (bf16);
// the tolerances are 4e-3 and 3e-2; over a q8_0 cache (exact scores, P and
// V rounded to f16) 4e-3. The merge adds f32 sums over slices.
#include <catch2/catch.hpp>

#include "attention_case.h"

using namespace kiln;
using kiln::test::AttentionCase;

namespace {
const char* const kKernel = "attention_decode_tiles";
double tolerance(DType kv) { return kv == DType::bf16 ? 3e-2 : 4e-3; }
}  // namespace

TEST_CASE("attention_decode_tiles matches a double-precision reference", "[kernels][attention]") {
  for (DType kv : {DType::f16, DType::bf16, DType::i8})
    kiln::test::check_attention_sweep(kKernel, tolerance(kv), {}, {kv});
}

namespace {
void slices_groups_windows(DType kv) {
  {
    // 36 heads over 2 KV heads: a group of 18 takes two programs of 16 rows.
    // Head size 256 once: its CPU compile takes seconds.
    for (auto [D, split] :
         {std::pair<int64_t, int64_t>{64, 16}, {kv == DType::f16 ? 256 : 128, 64}}) {
      AttentionCase c{.kv = kv, .head_dim = D, .n_heads = 36, .n_kv_heads = 2};
      c.pos0 = 150;
      c.kv_len = 151;
      c.max_ctx = 170;
      INFO("SPLIT=" << split);
      kiln::test::check_attention(kKernel, c, tolerance(kv), {{"SPLIT", split}});
    }
    AttentionCase c{.kv = kv, .head_dim = 64, .n_heads = 8, .n_kv_heads = 2};
    c.n_tokens = 3;
    c.pos0 = 90;
    c.kv_len = 93;
    c.window = 40;
    kiln::test::check_attention(kKernel, c, tolerance(kv), {{"SPLIT", 32}});
    c.sinks = true;
    kiln::test::check_attention(kKernel, c, tolerance(kv), {{"SPLIT", 32}});
    c.window = 0;
    c.page = 32;
    kiln::test::check_attention(kKernel, c, tolerance(kv), {{"SPLIT", 32}, {"BLOCK_G", 32}});
  }
}
}  // namespace

// f16 in CI; bf16's tiles differ only in the element type (`test_kernels
// "[long]"`): each variant is a JIT compile of seconds.
TEST_CASE("attention_decode_tiles over slices, groups, windows, sinks and pages",
          "[kernels][attention]") {
  slices_groups_windows(DType::f16);
}

TEST_CASE("attention_decode_tiles over slices, groups, windows, sinks and pages over bf16",
          "[kernels][attention][.long]") {
  slices_groups_windows(DType::bf16);
}

TEST_CASE("attention_decode_tiles matches the interpreter", "[kernels][attention]") {
  for (DType kv : {DType::f16, DType::bf16, DType::i8}) {
    AttentionCase c{.kv = kv, .head_dim = 64, .n_heads = 8, .n_kv_heads = 2};
    c.n_tokens = 2;
    c.pos0 = 40;
    c.kv_len = 42;
    kiln::test::check_attention_interpreted(kKernel, c, tolerance(kv), {{"SPLIT", 16}});
  }
}
