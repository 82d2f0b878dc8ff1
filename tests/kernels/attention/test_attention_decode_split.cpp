// Split-K decode attention (attention_decode_split, then
// attention_decode_merge) against the double-precision reference and the
// interpreter: one slice and many, slices off the key blocks' ends, every
// query head of a group, BLOCK_G below and above the group, several query
// tokens (whose later slices are empty for the earlier tokens), and a cache
// allocated past kv_len whose unseen rows hold NaN.
//
// Tolerance as attention_decode's (2e-5 absolute on convex combinations of
// V rows in [-1, 1]): each slice is the same f32 walk, and the merge adds
// one exp2 weight and f32 sums over at most kv_len / SPLIT slices.
#include <catch2/catch.hpp>

#include "attention_case.h"

using namespace kiln;
using kiln::test::AttentionCase;
using kiln::test::HostBuffer;

namespace {
constexpr double kAtol = 2e-5;

void check_split(const AttentionCase& c, const std::map<std::string, int64_t>& constexprs) {
  INFO("split " << c.describe());
  kiln::test::AttentionData d(c);
  HostBuffer out = kiln::test::run_split_attention(c, d, false, constexprs);
  CHECK(kiln::test::worst_error(out, kiln::test::attention_reference(c, d), kAtol, 0) <= 1.0);
}
}  // namespace

TEST_CASE("split-K decode attention matches a double-precision reference", "[kernels][attention]") {
  for (DType kv : {DType::f16, DType::bf16, DType::f32, DType::i8})
    for (int64_t D : {64, 128, 256})
      for (auto [nh, nkv] : {std::pair{4, 4}, std::pair{8, 2}, std::pair{14, 2}})
        for (int64_t split : {16, 64})
          for (auto [nt, pos0] : {std::pair{1, 0}, std::pair{1, 200}, std::pair{5, 77}}) {
            AttentionCase c{.kv = kv, .head_dim = D, .n_heads = nh, .n_kv_heads = nkv};
            c.n_tokens = nt;
            c.pos0 = pos0;
            c.kv_len = pos0 + nt + 2;
            c.max_ctx = c.kv_len + 19;
            INFO("SPLIT=" << split);
            check_split(c, {{"SPLIT", split}});
          }
}

TEST_CASE("split-K decode attention with other head blocks", "[kernels][attention]") {
  for (int64_t bg : {1, 2, 4, 8}) {
    INFO("BLOCK_G=" << bg);
    AttentionCase c{.kv = DType::f16, .head_dim = 64, .n_heads = 12, .n_kv_heads = 2};
    c.n_tokens = 2;
    c.pos0 = 130;
    c.kv_len = 140;
    c.q_range = 8;
    check_split(c, {{"BLOCK_G", bg}, {"SPLIT", 32}});
  }
}

TEST_CASE("split-K decode attention matches the interpreter", "[kernels][attention]") {
  // V holds exactly kv_len rows, so an unmasked read past them is an
  // interpreter error.
  for (DType kv : {DType::f16, DType::i8}) {
    AttentionCase c{.kv = kv, .head_dim = 64, .n_heads = 8, .n_kv_heads = 2};
    c.n_tokens = 2;
    c.pos0 = 40;
    c.kv_len = 42;
    INFO(c.describe());
    kiln::test::AttentionData d(c);
    const std::map<std::string, int64_t> consts = {{"SPLIT", 16}, {"BLOCK_G", 4}};
    HostBuffer out = kiln::test::run_split_attention(c, d, false, consts);
    HostBuffer outi = kiln::test::run_split_attention(c, d, true, consts);
    CHECK(kiln::test::worst_error(out, kiln::test::as_doubles(outi), kAtol, 0) <= 1.0);
    CHECK(kiln::test::worst_error(outi, kiln::test::attention_reference(c, d), kAtol, 0) <= 1.0);
  }
}

TEST_CASE("split-K decode attention refuses a slice off the key blocks",
          "[kernels][attention][error]") {
  AttentionCase c{.kv = DType::f16, .head_dim = 64, .n_heads = 8, .n_kv_heads = 2};
  c.kv_len = 4;
  kiln::test::AttentionData d(c);
  CHECK_THROWS_WITH(kiln::test::run_split_attention(c, d, false, {{"SPLIT", 24}}),
                    Catch::Contains("SPLIT must be a positive multiple of the key block"));
}
