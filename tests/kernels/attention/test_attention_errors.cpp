// Launches the attention kernels refuse, with messages that say why: head
// counts that do not form GQA groups, queries past the cache, caches smaller
// than kv_len, and constexprs the kernels cannot build.
#include <catch2/catch.hpp>

#include "attention_case.h"

using namespace kiln;
using kiln::test::AttentionCase;
using kiln::test::AttentionData;

namespace {

void check_refused(const AttentionCase& c, const std::string& why,
                   const std::map<std::string, int64_t>& constexprs = {}) {
  for (const char* kernel : {"attention_decode", "attention_prefill"}) {
    INFO(kernel << " " << c.describe());
    AttentionData d(c);
    REQUIRE_THROWS_WITH(
        kiln::test::run_attention(kiln::test::attention_spec(kernel, c, constexprs), c, d, false),
        Catch::Contains(std::string("kernel '") + kernel + "'") && Catch::Contains(why));
  }
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

TEST_CASE("attention kernels refuse a cache smaller than kv_len", "[kernels][attention][error]") {
  AttentionCase c = base();
  AttentionData d(c);
  c.kv_len = 6;  // the buffers hold 5 rows
  for (const char* kernel : {"attention_decode", "attention_prefill"})
    REQUIRE_THROWS_WITH(
        kiln::test::run_attention(kiln::test::attention_spec(kernel, c), c, d, false),
        Catch::Contains("buffer 'k' holds 640 elements, the launch needs 768"));
}

TEST_CASE("attention kernels refuse constexprs they cannot build", "[kernels][attention][error]") {
  AttentionCase c = base();
  c.head_dim = 72;
  check_refused(c, "HEAD_DIM must be a positive multiple of 16, got 72");
  check_refused(base(), "BLOCK_N must be a power of two, got 24", {{"BLOCK_N", 24}});
}
