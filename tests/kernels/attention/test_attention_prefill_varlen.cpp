// attention_prefill_varlen against the double-precision reference of each
// sequence on its own: ragged batches (1, 7, 128 and 1000 tokens, some
// after a cached prefix), their pages interleaved in the pool among spare
// NaN pages, windows and sinks, and the interpreter; check_varlen_batch's
// errors.
//
// Tolerance: attention_prefill's (2e-5 absolute): each sequence runs its
// program unchanged.
#include <catch2/catch.hpp>

#include "attention_case.h"
#include "kernels/attention/attention_shape.h"
#include "runtime/kv_page_pool.h"

using namespace kiln;
using kiln::test::AttentionCase;
using kiln::test::AttentionData;
using kiln::test::HostBuffer;

namespace {
constexpr double kAtol = 2e-5;
constexpr int64_t kPage = 16;

// Sequence i: n[i] new tokens at position pos0[i], its own random q, K, V.
void check_batch(const std::vector<int32_t>& n, const std::vector<int32_t>& pos0, int64_t window,
                 bool sinks, bool interpret = false, std::map<std::string, int64_t> consts = {},
                 DType kv = DType::f16) {
  const int64_t D = 64, H = 8, KVH = 2, S = static_cast<int64_t>(n.size());
  std::vector<AttentionCase> cs;
  std::vector<AttentionData> ds;
  std::vector<int32_t> cu = {0};
  int64_t max_ctx = 0;
  for (int64_t i = 0; i < S; ++i) max_ctx = std::max<int64_t>(max_ctx, pos0[i] + n[i] + 5);
  for (int64_t i = 0; i < S; ++i) {
    AttentionCase c{.kv = kv, .head_dim = D, .n_heads = H, .n_kv_heads = KVH};
    c.n_tokens = n[i];
    c.pos0 = pos0[i];
    c.kv_len = c.max_ctx = pos0[i] + n[i];
    c.window = window;
    c.sinks = sinks;
    c.seed = 11 + static_cast<uint64_t>(i);
    cs.push_back(c);
    ds.emplace_back(c);
    if (i) ds[i].sinks = ds[0].sinks;  // sinks are the heads', shared by the batch
    cu.push_back(cu.back() + n[i]);
  }
  const int64_t T = cu.back();
  const int64_t max_seq = check_varlen_batch(cu, pos0, T, max_ctx);
  std::vector<int64_t> lens;
  for (const AttentionCase& c : cs) lens.push_back(c.kv_len);
  kiln::test::InterleavedPool pages(lens, max_ctx, kPage);
  const int64_t n_pages = pages.pool.n_pages(), per_seq = (max_ctx + kPage - 1) / kPage;
  auto kvpool = kiln::test::KvTensors::nan_pool(cs[0], n_pages, kPage);
  kiln::test::QueryTensors q(cs[0], T * H * D);
  HostBuffer out(DType::f32, T * H * D), table(DType::i32, S * per_seq), cu_b(DType::i32, S + 1),
      pos_b(DType::i32, S);
  for (int64_t i = 0; i < out.size(); ++i) out.set(i, NAN);
  std::vector<double> want(static_cast<size_t>(T * H * D));
  for (int64_t i = 0; i < S; ++i) {
    const AttentionCase& c = cs[i];
    std::vector<int32_t> t = pages.pool.padded_table(pages.ids[i], per_seq);
    for (int64_t e = 0; e < per_seq; ++e) table.set(i * per_seq + e, t[e]);
    ds[i].write_pages(c, c.kv_len, t, kPage, kvpool);
    std::vector<double> ref = kiln::test::attention_reference(c, ds[i]);
    q.copy(ds[i].q, 0, cu[i] * H * D, n[i] * H * D);
    for (int64_t x = 0; x < n[i] * H * D; ++x) want[cu[i] * H * D + x] = ref[x];
    cu_b.set(i, cu[i]);
    pos_b.set(i, pos0[i]);
  }
  cu_b.set(S, T);
  consts["HEAD_DIM"] = D;
  consts["PAGE"] = kPage;
  consts["SINKS"] = sinks;
  Spec spec = find_kernel("attention_prefill_varlen").make_spec({{"KV", kv}}, consts);
  LaunchArgs args = {{"q", q.q},
                     {"k", kvpool.k},
                     {"v", kvpool.v},
                     {"out", out},
                     {"cu_seqlens", cu_b},
                     {"seq_pos0", pos_b},
                     {"n_tokens", T},
                     {"n_heads", H},
                     {"n_kv_heads", KVH},
                     {"max_ctx", max_ctx},
                     {"n_seqs", S},
                     {"max_seq_tokens", max_seq},
                     {"scale", cs[0].scale()},
                     {"window", window},
                     {"block_table", table},
                     {"n_pages", n_pages}};
  kvpool.add_scale_args(args);
  q.add_scale_args(args);
  if (sinks) args.emplace_back("sinks", ds[0].sinks);
  if (interpret)
    test::runtime().interpret(spec, args);
  else
    test::runtime().launch(spec, args);
  CHECK(kiln::test::worst_error(out, want, kAtol, 0) <= 1.0);
}
}  // namespace

TEST_CASE("varlen prefill of a ragged batch matches each sequence's reference",
          "[kernels][attention]") {
  SECTION("1, 7, 128 and 1000 tokens from position 0") {
    check_batch({1, 7, 128, 1000}, {0, 0, 0, 0}, 0, false);
  }
  SECTION("chunks after cached prefixes, other block sizes") {
    for (int64_t bm : {1, 4, 16}) {
      INFO("BLOCK_M=" << bm);
      check_batch({7, 33, 1}, {45, 3, 90}, 0, false, false, {{"BLOCK_M", bm}});
    }
  }
  SECTION("windows and sinks") {
    check_batch({7, 40, 1}, {20, 0, 64}, 9, true);
    check_batch({30, 5}, {0, 17}, 100, false);
  }
  SECTION("a q8_0 cache") { check_batch({7, 40, 1}, {20, 0, 64}, 9, true, false, {}, DType::i8); }
}

TEST_CASE("varlen prefill matches the interpreter", "[kernels][attention]") {
  check_batch({3, 1, 5}, {4, 0, 18}, 0, true, true);
  check_batch({3, 1, 5}, {4, 0, 18}, 0, false, true, {}, DType::i8);
}

TEST_CASE("varlen batches that do not add up are refused", "[kernels][attention][error]") {
  CHECK_THROWS_WITH(check_varlen_batch({0, 3, 5}, {0}, 5, 64),
                    Catch::Contains("cu_seqlens has 3 entries for 1 sequences"));
  CHECK_THROWS_WITH(check_varlen_batch({0, 3, 6}, {0, 0}, 5, 64),
                    Catch::Contains("not from 0 to n_tokens = 5"));
  CHECK_THROWS_WITH(check_varlen_batch({0, 4, 2}, {0, 0}, 2, 64),
                    Catch::Contains("sequence 1 has -2 tokens"));
  CHECK_THROWS_WITH(check_varlen_batch({0, 4, 6}, {0, 63}, 6, 64),
                    Catch::Contains("sequence 1 has 2 tokens at position 63"));
  CHECK(check_varlen_batch({0, 4, 6}, {0, 3}, 6, 64) == 4);
  Spec contiguous =
      find_kernel("attention_prefill_varlen").make_spec({{"KV", DType::f16}}, {{"PAGE", 0}});
  CHECK_THROWS_WITH(build_kernel(contiguous), Catch::Contains("PAGE must be > 0"));
}
