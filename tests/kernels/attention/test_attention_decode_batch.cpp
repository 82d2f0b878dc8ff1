// attention_decode_batch against the double-precision reference of each
// sequence on its own: one decode token per sequence at ragged lengths (1,
// 7, 128, 1000 keys), their pages interleaved in the pool among spare NaN
// pages and their table rows padded with -1, windows, sinks, a q8_0 cache,
// other head blocks, and the interpreter.
//
// Tolerance: attention_decode's (2e-5 absolute): each sequence runs the
// same walk.
#include <catch2/catch.hpp>

#include "attention_case.h"
#include "runtime/kv_page_pool.h"

using namespace kiln;
using kiln::test::AttentionCase;
using kiln::test::AttentionData;
using kiln::test::HostBuffer;

namespace {
constexpr double kAtol = 2e-5;
constexpr int64_t kPage = 16;

struct Batch {
  std::vector<int64_t> lens;  // keys of each sequence, its query the last
  int64_t window = 0;
  bool sinks = false;
  DType kv = DType::f16;
  int64_t head_dim = 64, n_heads = 8, n_kv_heads = 2;
};

void check_batch(const Batch& b, bool interpret = false,
                 std::map<std::string, int64_t> consts = {}) {
  const int64_t D = b.head_dim, H = b.n_heads, S = static_cast<int64_t>(b.lens.size());
  int64_t max_ctx = 0;
  for (int64_t n : b.lens) max_ctx = std::max(max_ctx, n + 3);
  std::vector<AttentionCase> cs;
  std::vector<AttentionData> ds;
  for (int64_t i = 0; i < S; ++i) {
    AttentionCase c{.kv = b.kv, .head_dim = D, .n_heads = H, .n_kv_heads = b.n_kv_heads};
    c.pos0 = b.lens[i] - 1;
    c.kv_len = c.max_ctx = b.lens[i];
    c.window = b.window;
    c.sinks = b.sinks;
    c.seed = 21 + static_cast<uint64_t>(i);
    cs.push_back(c);
    ds.emplace_back(c);
    if (i) ds[i].sinks = ds[0].sinks;  // the heads' sinks, shared by the batch
  }
  kiln::test::InterleavedPool pages(b.lens, max_ctx, kPage);
  const int64_t n_pages = pages.pool.n_pages(), per_seq = (max_ctx + kPage - 1) / kPage;
  auto kvpool = kiln::test::KvTensors::nan_pool(cs[0], n_pages, kPage);
  kiln::test::QueryTensors q(cs[0], S * H * D);
  HostBuffer out(DType::f32, S * H * D), table(DType::i32, S * per_seq), lens(DType::i32, S);
  for (int64_t i = 0; i < out.size(); ++i) out.set(i, NAN);
  std::vector<double> want(static_cast<size_t>(S * H * D));
  for (int64_t i = 0; i < S; ++i) {
    std::vector<int32_t> t = pages.pool.padded_table(pages.ids[i], per_seq);
    for (int64_t e = 0; e < per_seq; ++e) table.set(i * per_seq + e, t[e]);
    ds[i].write_pages(cs[i], b.lens[i], t, kPage, kvpool);
    std::vector<double> ref = kiln::test::attention_reference(cs[i], ds[i]);
    q.copy(ds[i].q, 0, i * H * D, H * D);
    for (int64_t x = 0; x < H * D; ++x) want[i * H * D + x] = ref[x];
    lens.set(i, b.lens[i]);
  }
  consts["HEAD_DIM"] = D;
  consts["PAGE"] = kPage;
  consts["SINKS"] = b.sinks;
  Spec spec = find_kernel("attention_decode_batch").make_spec({{"KV", b.kv}}, consts);
  LaunchArgs args = {{"q", q.q},           {"k", kvpool.k},
                     {"v", kvpool.v},      {"out", out},
                     {"seq_len", lens},    {"n_seqs", S},
                     {"n_heads", H},       {"n_kv_heads", b.n_kv_heads},
                     {"max_ctx", max_ctx}, {"scale", cs[0].scale()},
                     {"window", b.window}, {"block_table", table},
                     {"n_pages", n_pages}};
  kvpool.add_scale_args(args);
  q.add_scale_args(args);
  if (b.sinks) args.emplace_back("sinks", ds[0].sinks);
  if (interpret)
    test::runtime().interpret(spec, args);
  else
    test::runtime().launch(spec, args);
  CHECK(kiln::test::worst_error(out, want, kAtol, 0) <= 1.0);
}
}  // namespace

TEST_CASE("a batched decode step matches each sequence's reference", "[kernels][attention]") {
  SECTION("ragged lengths") { check_batch({.lens = {1, 7, 128, 1000}}); }
  SECTION("windows and sinks") {
    check_batch({.lens = {40, 1, 300, 17}, .window = 24, .sinks = true});
    check_batch({.lens = {5, 70}, .window = 100});
  }
  SECTION("cache dtypes and head sizes") {
    for (DType kv : {DType::bf16, DType::f32, DType::i8})
      for (int64_t D : {128, 256}) {
        INFO(kiln::test::AttentionCase{.kv = kv}.describe() << " D=" << D);
        check_batch({.lens = {33, 2, 90}, .kv = kv, .head_dim = D, .n_heads = 4, .n_kv_heads = 4});
      }
  }
  SECTION("head blocks") {
    for (int64_t bg : {1, 4, 8}) {
      INFO("BLOCK_G=" << bg);
      check_batch({.lens = {20, 65, 3}, .n_heads = 12, .n_kv_heads = 2}, false, {{"BLOCK_G", bg}});
    }
  }
}

TEST_CASE("a batched decode step matches the interpreter's", "[kernels][attention]") {
  // The interpreter faults on a read outside a buffer, and the pool's spare
  // pages hold NaN.
  check_batch({.lens = {3, 20, 1}, .window = 7, .sinks = true}, true);
  check_batch({.lens = {18, 2}, .kv = DType::i8}, true);
}

TEST_CASE("a batched decode step needs a paged cache", "[kernels][attention][error]") {
  Spec contiguous =
      find_kernel("attention_decode_batch").make_spec({{"KV", DType::f16}}, {{"PAGE", 0}});
  CHECK_THROWS_WITH(build_kernel(contiguous), Catch::Contains("PAGE must be > 0"));
}
