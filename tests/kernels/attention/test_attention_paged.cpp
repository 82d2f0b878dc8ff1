// Attention over a paged KV cache (kv_cache.h's pool, PAGE > 0) against the
// double-precision reference and the interpreter: every attention kernel,
// pages of 16 and 32 rows in shuffled pool order among spare pages of NaN,
// one page and many, with windows and sinks; two sequences sharing a forked
// prefix (KvPagePool's tables, a copied-on-write page among them); and
// kv_cache_store writing through a table.
//
// Tolerance: as the kernels' own tests (2e-5 absolute): paging changes only
// where a block's rows are read from.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "attention_case.h"
#include "runtime/kv_page_pool.h"

using namespace kiln;
using kiln::test::AttentionCase;
using kiln::test::HostBuffer;

namespace {
constexpr double kAtol = 2e-5;
const std::map<std::string, int64_t> kSplit32 = {{"SPLIT", 32}}, kNone;

HostBuffer run(const std::string& kernel, const AttentionCase& c, kiln::test::AttentionData& d,
               bool interpret = false) {
  return kiln::test::run_any_attention(kernel, c, d, interpret,
                                       kernel == "split" ? kSplit32 : kNone);
}

const char* const kKernels[] = {"attention_decode", "split", "attention_prefill"};

// Replaces the argument named `name` in `args`.
void set_arg(LaunchArgs& args, const std::string& name, const LaunchArg& arg) {
  auto it = std::find_if(args.begin(), args.end(), [&](const auto& a) { return a.first == name; });
  REQUIRE(it != args.end());
  it->second = arg;
}

void check(const std::string& kernel, const AttentionCase& c) {
  INFO(kernel << " " << c.describe());
  kiln::test::AttentionData d(c);
  CHECK(kiln::test::worst_error(run(kernel, c, d), kiln::test::attention_reference(c, d), kAtol,
                                0) <= 1.0);
}
}  // namespace

TEST_CASE("attention over a paged cache matches a double-precision reference",
          "[kernels][attention]") {
  for (const char* kernel : kKernels)
    for (int64_t page : {16, 32})
      for (auto [nt, pos0] : {std::pair{1, 0}, std::pair{1, 100}, std::pair{9, 37}}) {
        AttentionCase c{.kv = DType::f16, .head_dim = 64, .n_heads = 8, .n_kv_heads = 2};
        c.page = page;
        c.n_tokens = nt;
        c.pos0 = pos0;
        c.kv_len = pos0 + nt + 2;
        c.max_ctx = c.kv_len + 21;
        check(kernel, c);
        c.window = 11;
        c.sinks = true;
        check(kernel, c);
      }
}

TEST_CASE("paged attention over dtypes and head sizes", "[kernels][attention]") {
  for (DType kv : {DType::bf16, DType::f32, DType::i8})
    for (int64_t D : {128, 256})
      for (const char* kernel : kKernels) {
        AttentionCase c{.kv = kv, .head_dim = D, .n_heads = 4, .n_kv_heads = 4};
        c.page = 16;
        c.n_tokens = std::string(kernel) == "attention_prefill" ? 5 : 1;
        c.pos0 = 70;
        c.kv_len = 76;
        check(kernel, c);
      }
}

TEST_CASE("paged attention matches the interpreter", "[kernels][attention]") {
  AttentionCase c{.kv = DType::f16, .head_dim = 64, .n_heads = 8, .n_kv_heads = 2};
  c.page = 16;
  c.n_tokens = 3;
  c.pos0 = 30;
  c.kv_len = 33;
  for (const char* kernel : kKernels) {
    c.kv = c.kv == DType::f16 ? DType::i8 : DType::f16;  // each kernel once paged q8_0
    INFO(kernel << " " << c.describe());
    kiln::test::AttentionData d(c);
    HostBuffer out = run(kernel, c, d), outi = run(kernel, c, d, true);
    CHECK(kiln::test::worst_error(out, kiln::test::as_doubles(outi), kAtol, 0) <= 1.0);
  }
}

TEST_CASE("two sequences sharing a forked prefix read their own rows", "[kernels][attention]") {
  // a holds 40 rows; b forks a at 40 (inside its third page of 16) and
  // appends 13 rows of its own, a then 20 of its own: b's write copies
  // the shared half page, a's goes into it in place.
  const int64_t P = 16, D = 64;
  KvPagePool pool(12, P);
  auto a = pool.create();
  pool.append(a, 40);
  auto b = pool.fork(a);
  auto copies = pool.append(b, 13);
  REQUIRE(copies.size() == 1);
  pool.append(a, 20);
  CHECK(pool.table(a)[0] == pool.table(b)[0]);
  CHECK(pool.table(a)[1] == pool.table(b)[1]);

  AttentionCase ca{.kv = DType::f16, .head_dim = D, .n_heads = 8, .n_kv_heads = 2};
  ca.n_tokens = 4;  // the last 4 rows of each sequence as queries
  ca.kv_len = ca.max_ctx = 60;
  ca.pos0 = 56;
  AttentionCase cb = ca;
  cb.kv_len = cb.max_ctx = 53;
  cb.pos0 = 49;
  cb.seed = 9;
  kiln::test::AttentionData da(ca), db(cb);
  // b's first 40 rows are a's (the prefix both computed once).
  for (int64_t j = 0; j < 40; ++j)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < D; ++i) {
        db.cache.k.set(k_cache_index(j, h, i, cb.rows(), D, cb.key_block()),
                       da.cache.k.get(k_cache_index(j, h, i, ca.rows(), D, ca.key_block())));
        db.cache.v.set(v_cache_index(j, h, i, cb.rows(), D),
                       da.cache.v.get(v_cache_index(j, h, i, ca.rows(), D)));
      }
  // One pool holding both: a's rows, then b's (the shared pages twice, with
  // the same values).
  auto shared = kiln::test::KvTensors::nan_pool(ca, 12, P);
  da.write_pages(ca, ca.kv_len, pool.table(a), P, shared);
  db.write_pages(cb, cb.kv_len, pool.table(b), P, shared);
  for (auto [c, d, s] : {std::tuple{&ca, &da, a}, std::tuple{&cb, &db, b}})
    for (const char* kernel : {"attention_decode", "attention_prefill"}) {
      INFO(kernel << " sequence " << s);
      AttentionCase paged = *c;
      paged.page = P;
      HostBuffer table(DType::i32, (c->max_ctx + P - 1) / P);
      std::vector<int32_t> t = pool.padded_table(s, table.size());
      check_block_table(t, (c->kv_len + P - 1) / P, 12);
      for (int64_t i = 0; i < table.size(); ++i) table.set(i, t[i]);
      HostBuffer out(DType::f32, c->n_tokens * c->n_heads * D);
      LaunchArgs args = kiln::test::attention_args(*c, *d, out);
      set_arg(args, "k", shared.k);
      set_arg(args, "v", shared.v);
      args.insert(args.end(), {{"block_table", table}, {"n_pages", int64_t{12}}});
      test::runtime().launch(kiln::test::attention_spec(kernel, paged), args);
      CHECK(kiln::test::worst_error(out, kiln::test::attention_reference(*c, *d), kAtol, 0) <= 1.0);
    }
}

TEST_CASE("kv_cache_store writes through a block table", "[kernels][attention]") {
  const int64_t P = 16, D = 32, nkv = 2, n_pages = 5, nt = 7, pos0 = 13, max_ctx = 48;
  const std::vector<int32_t> pages = {3, 0, 4};
  HostBuffer xk = HostBuffer::random(DType::f32, nt * nkv * D, 1),
             xv = HostBuffer::random(DType::f32, nt * nkv * D, 2);
  HostBuffer k(DType::f16, k_pool_elems(n_pages, nkv, D, P)),
      v(DType::f16, v_pool_elems(n_pages, nkv, D, P)), table(DType::i32, 3);
  for (int64_t i = 0; i < 3; ++i) table.set(i, pages[i]);
  Spec s =
      find_kernel("kv_cache_store").make_spec({{"KV", DType::f16}}, {{"HEAD_DIM", D}, {"PAGE", P}});
  test::runtime().launch(s, {{"xk", xk},
                             {"xv", xv},
                             {"k", k},
                             {"v", v},
                             {"n_tokens", nt},
                             {"n_kv_heads", nkv},
                             {"max_ctx", max_ctx},
                             {"pos0", pos0},
                             {"block_table", table},
                             {"n_pages", n_pages}});
  const int64_t kb = kiln::test::kTestKeyBlock;
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t h = 0; h < nkv; ++h)
      for (int64_t i = 0; i < D; ++i) {
        const int64_t j = pos0 + t, pg = pages[j / P], x = (t * nkv + h) * D + i;
        INFO("token " << t << " head " << h << " dim " << i);
        CHECK(k.get(k_page_index(pg, j % P, h, i, n_pages, D, P, kb)) ==
              static_cast<double>(static_cast<_Float16>(xk.get(x))));
        CHECK(v.get(v_page_index(pg, j % P, h, i, n_pages, D, P)) ==
              static_cast<double>(static_cast<_Float16>(xv.get(x))));
      }
}

TEST_CASE("kv_cache_store writes a packed batch through each sequence's table",
          "[kernels][attention]") {
  // Two sequences' tokens interleaved as a serving step packs them (VARLEN):
  // each row lands in its own sequence's pages, f16 and q8_0 alike.
  const int64_t P = 16, D = 32, nkv = 2, n_pages = 6, max_ctx = 48, entries = 3;
  const std::vector<int32_t> seq = {0, 0, 1, 1, 1, 0}, pos = {14, 15, 3, 4, 5, 16};
  const std::vector<int32_t> tables = {5, 1, 2, /* seq 1 */ 0, -1, -1};
  const int64_t nt = static_cast<int64_t>(seq.size());
  HostBuffer xk = HostBuffer::random(DType::f32, nt * nkv * D, 3),
             xv = HostBuffer::random(DType::f32, nt * nkv * D, 4);
  HostBuffer positions(DType::i32, nt), tok_seq(DType::i32, nt), table(DType::i32, 2 * entries);
  for (int64_t t = 0; t < nt; ++t) {
    positions.set(t, pos[t]);
    tok_seq.set(t, seq[t]);
  }
  for (int64_t i = 0; i < 2 * entries; ++i) table.set(i, tables[i]);
  for (DType kv : {DType::f16, DType::i8}) {
    INFO(dtype_name(kv));
    const bool q8 = kv == DType::i8;
    HostBuffer k(kv, k_pool_elems(n_pages, nkv, D, P)), v(kv, v_pool_elems(n_pages, nkv, D, P));
    HostBuffer ks(DType::f16, k_pool_elems(n_pages, nkv, D, P) / 32),
        vs(DType::f16, v_pool_elems(n_pages, nkv, D, P) / 32);
    Spec s = find_kernel("kv_cache_store")
                 .make_spec({{"KV", kv}}, {{"HEAD_DIM", D}, {"PAGE", P}, {"VARLEN", 1}});
    LaunchArgs args = {{"xk", xk},
                       {"xv", xv},
                       {"k", k},
                       {"v", v},
                       {"n_tokens", nt},
                       {"n_kv_heads", nkv},
                       {"max_ctx", max_ctx},
                       {"positions", positions},
                       {"tok_seq", tok_seq},
                       {"n_seqs", int64_t{2}},
                       {"block_table", table},
                       {"n_pages", n_pages}};
    if (q8) args.insert(args.end(), {{"k_scale", ks}, {"v_scale", vs}});
    test::runtime().launch(s, args);
    const int64_t kb = kiln::test::kTestKeyBlock;
    for (int64_t t = 0; t < nt; ++t)
      for (int64_t h = 0; h < nkv; ++h)
        for (int64_t i = 0; i < D; ++i) {
          const int64_t j = pos[t], pg = tables[seq[t] * entries + j / P],
                        x = (t * nkv + h) * D + i;
          INFO("token " << t << " head " << h << " dim " << i);
          const int64_t ki = k_page_index(pg, j % P, h, i, n_pages, D, P, kb),
                        vi = v_page_index(pg, j % P, h, i, n_pages, D, P);
          if (!q8) {
            CHECK(k.get(ki) == static_cast<double>(static_cast<_Float16>(xk.get(x))));
            CHECK(v.get(vi) == static_cast<double>(static_cast<_Float16>(xv.get(x))));
            continue;
          }
          // q8_0: within half a step of its block's scale, plus the scale's f16
          // rounding (2^-11 relative) times up to 127 steps: 0.57 of a step.
          const double kscale = ks.get(k_page_index(pg, j % P, h, i / 32, n_pages, D / 32, P, kb)),
                       vscale = vs.get(v_page_index(pg, j % P, h, i / 32, n_pages, D / 32, P));
          CHECK(kscale > 0);
          CHECK(std::fabs(k.get(ki) * kscale - xk.get(x)) <= 0.57 * kscale);
          CHECK(std::fabs(v.get(vi) * vscale - xv.get(x)) <= 0.57 * vscale);
        }
  }
}

TEST_CASE("attention kernels refuse a page off the key blocks and an empty pool",
          "[kernels][attention][error]") {
  AttentionCase c{.kv = DType::f16, .head_dim = 64, .n_heads = 8, .n_kv_heads = 2};
  c.kv_len = 4;
  c.page = 16;
  kiln::test::AttentionData d(c);
  CHECK_THROWS_WITH(
      run(
          "attention_decode",
          [&] {
            AttentionCase x = c;
            x.page = 24;
            return x;
          }(),
          d),
      Catch::Contains("kernel 'attention_decode': PAGE must be 0 (a contiguous cache) or a "
                      "multiple of the key block"));
  d.n_pages = 0;
  CHECK_THROWS_WITH(run("attention_prefill", c, d),
                    Catch::Contains("n_pages = 0 (a paged cache needs a pool of >= 1 page)"));
}
