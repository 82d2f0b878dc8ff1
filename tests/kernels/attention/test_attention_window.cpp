// Sliding-window attention (attention_window.h) in every attention kernel
// (decode, split-K decode + merge, prefill) against the double-precision
// reference and the interpreter: windows of 1 key, off and on the key
// blocks, narrower and wider than the query block, and wider than the
// context; one token and many, after an empty and a long cache. Rows before
// the first query's window hold NaN (attention_case.h), so a kernel that
// reads one fails.
//
// Tolerance: as the kernels' own tests (2e-5 absolute on convex
// combinations of V rows in [-1, 1]): the window only changes which keys
// enter the same f32 walk.
#include <catch2/catch.hpp>

#include "attention_case.h"

using namespace kiln;
using kiln::test::AttentionCase;
using kiln::test::HostBuffer;

namespace {
constexpr double kAtol = 2e-5;

// `kernel` is attention_decode, attention_prefill or "split" (the split-K pair).
void check(const std::string& kernel, const AttentionCase& c,
           const std::map<std::string, int64_t>& constexprs = {}) {
  INFO(kernel << " " << c.describe());
  kiln::test::AttentionData d(c);
  HostBuffer out = kernel == "split"
                       ? kiln::test::run_split_attention(c, d, false, constexprs)
                       : kiln::test::run_attention(
                             kiln::test::attention_spec(kernel, c, constexprs), c, d, false);
  CHECK(kiln::test::worst_error(out, kiln::test::attention_reference(c, d), kAtol, 0) <= 1.0);
}

AttentionCase windowed(int64_t window, int64_t n_tokens, int64_t pos0) {
  AttentionCase c{.kv = DType::f16, .head_dim = 64, .n_heads = 8, .n_kv_heads = 2};
  c.window = window;
  c.n_tokens = n_tokens;
  c.pos0 = pos0;
  c.kv_len = pos0 + n_tokens + 3;
  c.max_ctx = c.kv_len + 7;
  return c;
}
}  // namespace

TEST_CASE("decode attention with a sliding window matches a double-precision reference",
          "[kernels][attention]") {
  for (int64_t w : {1, 5, 16, 17, 40, 1000})
    for (auto [nt, pos0] : {std::pair{1, 0}, std::pair{1, 45}, std::pair{3, 130}}) {
      check("attention_decode", windowed(w, nt, pos0));
      for (int64_t split : {16, 64}) {
        INFO("SPLIT=" << split);
        check("split", windowed(w, nt, pos0), {{"SPLIT", split}});
      }
    }
}

TEST_CASE("prefill attention with a sliding window matches a double-precision reference",
          "[kernels][attention]") {
  for (int64_t w : {1, 5, 16, 17, 40, 1000})
    for (auto [nt, pos0] : {std::pair{7, 0}, std::pair{33, 0}, std::pair{37, 45}})
      for (int64_t bm : {1, 4, 16}) {
        INFO("BLOCK_M=" << bm);
        check("attention_prefill", windowed(w, nt, pos0), {{"BLOCK_M", bm}});
      }
}

TEST_CASE("windowed attention over dtypes and head sizes", "[kernels][attention]") {
  for (DType kv : {DType::bf16, DType::f32, DType::i8})
    for (int64_t D : {128, 256}) {
      AttentionCase c = windowed(24, 1, 300);
      c.kv = kv;
      c.head_dim = D;
      c.q_range = 8;
      check("attention_decode", c);
      check("split", c, {{"SPLIT", 32}});
      c.n_tokens = 20;
      c.pos0 = 280;
      check("attention_prefill", c);
    }
}

TEST_CASE("windowed attention matches the interpreter", "[kernels][attention]") {
  // V holds exactly kv_len rows, so an unmasked read past them is an
  // interpreter error.
  AttentionCase c = windowed(13, 3, 40);
  c.kv_len = 43;
  c.max_ctx = 0;
  for (const char* kernel : {"attention_decode", "attention_prefill"})
    kiln::test::check_attention_interpreted(kernel, c, kAtol, {});
  kiln::test::AttentionData d(c);
  HostBuffer out = kiln::test::run_split_attention(c, d, false, {{"SPLIT", 16}});
  HostBuffer outi = kiln::test::run_split_attention(c, d, true, {{"SPLIT", 16}});
  CHECK(kiln::test::worst_error(out, kiln::test::as_doubles(outi), kAtol, 0) <= 1.0);
}

TEST_CASE("attention kernels refuse a negative window", "[kernels][attention][error]") {
  AttentionCase c = windowed(-1, 1, 4);
  kiln::test::AttentionData d(c);
  for (const char* kernel : {"attention_decode", "attention_prefill"})
    CHECK_THROWS_WITH(
        kiln::test::run_attention(kiln::test::attention_spec(kernel, c), c, d, false),
        Catch::Contains(std::string("kernel '") + kernel + "': window = -1 is negative"));
  CHECK_THROWS_WITH(kiln::test::run_split_attention(c, d, false, {{"SPLIT", 16}}),
                    Catch::Contains("kernel 'attention_decode_split': window = -1 is negative"));
}
