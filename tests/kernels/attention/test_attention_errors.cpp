// Launches the attention kernels refuse, with messages that say why: head
// counts that do not form GQA groups, queries past the cache, caches smaller
// than max_ctx or kv_len, and constexprs the kernels cannot build.
#include <catch2/catch.hpp>

#include "attention_case.h"

using namespace kiln;
using kiln::test::AttentionCase;
using kiln::test::AttentionData;

namespace {

void check_refused_by(const std::string& kernel, const AttentionCase& c, const std::string& why,
                      const std::map<std::string, int64_t>& constexprs = {}) {
  INFO(kernel << " " << c.describe());
  AttentionData d(c);
  REQUIRE_THROWS_WITH(
      kiln::test::run_attention(kiln::test::attention_spec(kernel, c, constexprs), c, d, false),
      Catch::Contains("kernel '" + kernel + "'") && Catch::Contains(why));
}

void check_refused(const AttentionCase& c, const std::string& why) {
  for (const char* kernel : {"attention_decode", "attention_prefill"})
    check_refused_by(kernel, c, why);
}

AttentionCase base() {
  AttentionCase c{.kv = DType::f16, .head_dim = 64, .n_heads = 8, .n_kv_heads = 2};
  c.n_tokens = 2;
  c.pos0 = 3;
  c.kv_len = 5;
  return c;
}

}  // namespace

TEST_CASE("attention kernels refuse heads that do not form groups", "[kernels][attention][error]") {
  AttentionCase c = base();
  c.n_heads = 6;
  c.n_kv_heads = 4;
  check_refused(c, "n_heads = 6 is not a multiple of n_kv_heads = 4");
  c.n_heads = 4;
  c.n_kv_heads = 0;
  check_refused(c, "must both be >= 1");
}

TEST_CASE("attention kernels refuse queries past the cache", "[kernels][attention][error]") {
  AttentionCase c = base();
  c.kv_len = 4;  // pos0 + n_tokens = 5
  c.max_ctx = 5;
  check_refused(c, "pos0 + n_tokens = 3 + 2 exceeds kv_len = 4");
  c = base();
  c.pos0 = -1;
  check_refused(c, "pos0 = -1 is negative");
  c = base();
  c.n_tokens = 0;
  check_refused(c, "n_tokens = 0 (need >= 1)");
}

TEST_CASE("attention kernels refuse a cache smaller than it claims",
          "[kernels][attention][error]") {
  // The buffers hold 5 rows per head: V exactly (640 elements), K one block of 16 keys (2048).
  AttentionCase c = base();
  AttentionData d(c);
  for (auto [max_ctx, why] :
       {std::pair{6, "buffer 'v' holds 640 elements, the launch needs 768"},
        std::pair{17, "buffer 'k' holds 2048 elements, the launch needs 4096"}}) {
    c.max_ctx = max_ctx;
    for (const char* kernel : {"attention_decode", "attention_prefill"})
      REQUIRE_THROWS_WITH(
          kiln::test::run_attention(kiln::test::attention_spec(kernel, c), c, d, false),
          Catch::Contains(why));
  }
  c = base();
  c.kv_len = 6;
  c.max_ctx = 5;
  check_refused(c, "kv_len = 6 exceeds max_ctx = 5");
}

TEST_CASE("attention kernels refuse constexprs they cannot build", "[kernels][attention][error]") {
  AttentionCase c = base();
  c.head_dim = 72;
  check_refused(c, "HEAD_DIM must be a positive multiple of 16, got 72");
  check_refused_by("attention_decode", base(), "BLOCK_G must be a power of two, got 24",
                   {{"BLOCK_G", 24}});
  check_refused_by("attention_prefill", base(), "BLOCK_M must be a power of two, got 24",
                   {{"BLOCK_M", 24}});
}
