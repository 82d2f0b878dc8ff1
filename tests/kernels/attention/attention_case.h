// One attention launch for the tests: sizes, reproducible inputs, the
// launch arguments by the kernels' parameter names, a double-precision
// reference softmax(q K^T * scale + causal mask) V, and the comparisons.
//
// The cache is in the kernels' layout (kv_cache.h). Cache rows no query may
// see (rows >= pos0 + n_tokens, including rows past kv_len up to max_ctx and
// the last K block's padding, and with a sliding window the rows before the
// first query's window) hold NaN, so a kernel that reads or weights one
// produces NaN and fails the comparison. The reference reads the K/V values
// through the cache dtype, so f16 inputs are exact on both sides. A q8_0
// cache (kv i8) holds random codes in [-127, 127] and f16 scales in
// [0.5/127, 1/127], so its values lie in [-1, 1] as the float caches'; the
// unseen rows' scales are NaN.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/attention/kv_cache.h"
#include "kernels/registry.h"
#include "runtime/kv_page_pool.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"

namespace kiln::test {

// The cases build their specs for the default target (make_spec), whose
// kernels lay the K cache out in blocks of this many keys.
inline const int64_t kTestKeyBlock = kv_key_block(TargetDesc{});

struct AttentionCase {
  DType kv = DType::f16;
  DType act = DType::f32;  // q and out (the kernels' T)
  TargetDesc target = {};  // what the kernels are built for: their lanes and key blocks
  int64_t head_dim = 64, n_heads = 8, n_kv_heads = 2, n_tokens = 1, pos0 = 0, kv_len = 1;
  int64_t max_ctx = 0;  // cache rows allocated; 0: kv_len (exact, so overreads fault)
  double q_range = 3;   // q uniform in [-q_range, q_range]: scores spread over ~e^10
  int64_t window = 0;   // sliding window (attention_window.h); 0: none
  bool sinks = false;   // per-head sink logits, uniform in [-1, 3] (SINKS = 1)
  // > 0: the cache is a paged pool of pages of this many rows (PAGE), the
  // sequence's pages in shuffled order among 3 spare pages of NaN.
  int64_t page = 0;
  uint64_t seed = 1;

  int64_t rows() const { return max_ctx ? max_ctx : kv_len; }
  int64_t key_block() const { return kv_key_block(target); }
  // The first key the query at pos sees.
  int64_t window_begin(int64_t pos) const {
    return window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
  }
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }
  std::string describe() const {
    std::ostringstream os;
    os << kv_cache_type_name(kv) << " T=" << dtype_name(act) << " D=" << head_dim
       << " heads=" << n_heads << "/" << n_kv_heads << " n_tokens=" << n_tokens << " pos0=" << pos0
       << " kv_len=" << kv_len << " max_ctx=" << rows() << " window=" << window
       << " sinks=" << sinks << " page=" << page << " target=" << target.str();
    return os.str();
  }
};

// A cache's tensors: k and v, and a q8_0 cache's scales (kv_cache.h) in the
// same layout with head_dim / 32 dims.
struct KvTensors {
  HostBuffer k, v, ks{DType::f16, 0}, vs{DType::f16, 0};

  // A paged pool of n_pages pages for the case's cache, every element NaN.
  static KvTensors nan_pool(const AttentionCase& c, int64_t n_pages, int64_t page) {
    const int64_t D = c.head_dim, nkv = c.n_kv_heads;
    KvTensors p{HostBuffer(c.kv, k_pool_elems(n_pages, nkv, D, page)),
                HostBuffer(c.kv, v_pool_elems(n_pages, nkv, D, page))};
    if (is_quantized_kv(c.kv)) {
      p.ks = HostBuffer(DType::f16, p.k.size() / kKvQuantBlock);
      p.vs = HostBuffer(DType::f16, p.v.size() / kKvQuantBlock);
    }
    for (HostBuffer* b : {&p.k, &p.v, &p.ks, &p.vs})
      if (is_float(b->dtype()))
        for (int64_t i = 0; i < b->size(); ++i) b->set(i, NAN);
    return p;
  }
  // The q8_0 scales as the kernels' arguments k_scale, v_scale.
  void add_scale_args(LaunchArgs& a) {
    if (ks.size()) a.insert(a.end(), {{"k_scale", ks}, {"v_scale", vs}});
  }
};

// The kernels' query rows (kv_walk.h): q in the activation dtype, or with a
// q8_0 cache Q8_0 codes in [-127, 127] with f32 scales in [0.5, 1] *
// q_range / 127 (so q stays within [-q_range, q_range]) and the codes' sums.
struct QueryTensors {
  HostBuffer q, scale{DType::f32, 0}, sum{DType::i32, 0};

  QueryTensors(const AttentionCase& c, int64_t elems) : q(query_dtype(c), elems) {
    if (!q8(c)) return;
    scale = HostBuffer(DType::f32, elems / kKvQuantBlock);
    sum = HostBuffer(DType::i32, elems / kKvQuantBlock);
  }
  static QueryTensors random(const AttentionCase& c, int64_t elems, uint64_t seed) {
    QueryTensors t(c, elems);
    if (!q8(c)) {
      t.q = HostBuffer::random(c.act, elems, seed, -c.q_range, c.q_range);
      return t;
    }
    t.q = HostBuffer::random(DType::i8, elems, seed, -127.99, 127.99);
    t.scale = HostBuffer::random(DType::f32, elems / kKvQuantBlock, seed + 7, 0.5 * c.q_range / 127,
                                 c.q_range / 127);
    for (int64_t b = 0; b < t.sum.size(); ++b) {
      double s = 0;
      for (int64_t i = 0; i < kKvQuantBlock; ++i) s += t.q.get(b * kKvQuantBlock + i);
      t.sum.set(b, s);
    }
    return t;
  }
  static bool q8(const AttentionCase& c) { return is_quantized_kv(c.kv); }
  static DType query_dtype(const AttentionCase& c) { return q8(c) ? DType::i8 : c.act; }

  // Element i as the kernels read it.
  double get(int64_t i) const {
    return scale.size() ? q.get(i) * scale.get(i / kKvQuantBlock) : q.get(i);
  }
  // Copies elements [from, from + n) of src to [to, to + n) (whole 32-blocks
  // with a q8_0 cache).
  void copy(const QueryTensors& src, int64_t from, int64_t to, int64_t n) {
    for (int64_t i = 0; i < n; ++i) q.set(to + i, src.q.get(from + i));
    for (int64_t b = 0; b < n / kKvQuantBlock && scale.size(); ++b) {
      scale.set(to / kKvQuantBlock + b, src.scale.get(from / kKvQuantBlock + b));
      sum.set(to / kKvQuantBlock + b, src.sum.get(from / kKvQuantBlock + b));
    }
  }
  // A q8_0 cache's q_scale and q_sum arguments.
  void add_scale_args(LaunchArgs& a) {
    if (scale.size()) a.insert(a.end(), {{"q_scale", scale}, {"q_sum", sum}});
  }
};

struct AttentionData {
  explicit AttentionData(const AttentionCase& c)
      : q(QueryTensors::random(c, c.n_tokens * c.n_heads * c.head_dim, c.seed)),
        sinks(HostBuffer::random(DType::f32, c.n_heads, c.seed + 3, -1, 3)) {
    const int64_t k_elems = k_cache_elems(c.rows(), c.n_kv_heads, c.head_dim, c.key_block()),
                  v_elems = v_cache_elems(c.rows(), c.n_kv_heads, c.head_dim);
    const bool q8 = is_quantized_kv(c.kv);
    const double code = q8 ? 127 : 1;
    cache.k = HostBuffer::random(c.kv, k_elems, c.seed + 1, -code, code);
    cache.v = HostBuffer::random(c.kv, v_elems, c.seed + 2, -code, code);
    if (q8) {
      cache.ks =
          HostBuffer::random(DType::f16, k_elems / kKvQuantBlock, c.seed + 5, 0.5 / 127, 1.0 / 127);
      cache.vs =
          HostBuffer::random(DType::f16, v_elems / kKvQuantBlock, c.seed + 6, 0.5 / 127, 1.0 / 127);
    }
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // Every row past the last query, the last K block's padding included,
    // and every row before the first query's window.
    const int64_t padded = k_cache_elems(c.rows(), 1, 1, c.key_block());
    const int64_t unseen = c.window_begin(c.pos0);
    for (int64_t h = 0; h < c.n_kv_heads; ++h)
      for (int64_t j = 0; j < padded; ++j) {
        if (j >= unseen && j < c.pos0 + c.n_tokens) continue;
        for (int64_t i = 0; i < c.head_dim; ++i) {
          if (q8) {
            if (i % kKvQuantBlock) continue;
            const int64_t g = i / kKvQuantBlock, dg = c.head_dim / kKvQuantBlock;
            cache.ks.set(k_cache_index(j, h, g, c.rows(), dg, c.key_block()), nan);
            if (j < c.rows()) cache.vs.set(v_cache_index(j, h, g, c.rows(), dg), nan);
            continue;
          }
          cache.k.set(k_cache_index(j, h, i, c.rows(), c.head_dim, c.key_block()), nan);
          if (j < c.rows()) cache.v.set(v_cache_index(j, h, i, c.rows(), c.head_dim), nan);
        }
      }
    if (c.page) page_out(c);
  }

  // Element i of key (value) j of KV head h, as the kernels read it.
  double key(const AttentionCase& c, int64_t j, int64_t h, int64_t i) const {
    const double e = cache.k.get(k_cache_index(j, h, i, c.rows(), c.head_dim, c.key_block()));
    if (!is_quantized_kv(c.kv)) return e;
    return e * cache.ks.get(k_cache_index(j, h, i / kKvQuantBlock, c.rows(),
                                          c.head_dim / kKvQuantBlock, c.key_block()));
  }
  double value(const AttentionCase& c, int64_t j, int64_t h, int64_t i) const {
    const double e = cache.v.get(v_cache_index(j, h, i, c.rows(), c.head_dim));
    if (!is_quantized_kv(c.kv)) return e;
    return e * cache.vs.get(
                   v_cache_index(j, h, i / kKvQuantBlock, c.rows(), c.head_dim / kKvQuantBlock));
  }

  // The paged pool holding the same rows: pages of NaN, then the sequence's
  // rows written through a shuffled table.
  void page_out(const AttentionCase& c) {
    const int64_t used = (c.rows() + c.page - 1) / c.page;
    n_pages = used + 3;
    std::vector<int32_t> perm(static_cast<size_t>(n_pages));
    for (int64_t i = 0; i < n_pages; ++i) perm[i] = static_cast<int32_t>(i);
    std::mt19937_64 rng(c.seed + 4);
    std::shuffle(perm.begin(), perm.end(), rng);
    table = HostBuffer(DType::i32, used);
    for (int64_t i = 0; i < used; ++i) table.set(i, perm[i]);
    pool = KvTensors::nan_pool(c, n_pages, c.page);
    write_pages(c, c.rows(), perm, c.page, pool);
  }

  // Copies rows 0 .. rows-1 of this cache into a pool of pages of `page`
  // rows (kv_cache.h) through `table` (the sequence's pages).
  void write_pages(const AttentionCase& c, int64_t rows, const std::vector<int32_t>& table,
                   int64_t page, KvTensors& to) const {
    const int64_t D = c.head_dim, nkv = c.n_kv_heads, kb = c.key_block();
    const int64_t n_pages = to.v.size() / (nkv * page * D);
    const bool q8 = is_quantized_kv(c.kv);
    const int64_t dg = D / kKvQuantBlock;
    for (int64_t j = 0; j < rows; ++j)
      for (int64_t h = 0; h < nkv; ++h) {
        const int64_t pg = table[static_cast<size_t>(j / page)];
        for (int64_t i = 0; i < D; ++i) {
          to.k.set(k_page_index(pg, j % page, h, i, n_pages, D, page, kb),
                   cache.k.get(k_cache_index(j, h, i, c.rows(), D, kb)));
          to.v.set(v_page_index(pg, j % page, h, i, n_pages, D, page),
                   cache.v.get(v_cache_index(j, h, i, c.rows(), D)));
        }
        for (int64_t g = 0; q8 && g < dg; ++g) {
          to.ks.set(k_page_index(pg, j % page, h, g, n_pages, dg, page, kb),
                    cache.ks.get(k_cache_index(j, h, g, c.rows(), dg, kb)));
          to.vs.set(v_page_index(pg, j % page, h, g, n_pages, dg, page),
                    cache.vs.get(v_cache_index(j, h, g, c.rows(), dg)));
        }
      }
  }

  QueryTensors q;
  HostBuffer sinks;
  KvTensors cache{HostBuffer(DType::f16, 0), HostBuffer(DType::f16, 0)};  // contiguous
  // Paged cases: the pool and the sequence's block table.
  KvTensors pool{HostBuffer(DType::f16, 0), HostBuffer(DType::f16, 0)};
  HostBuffer table{DType::i32, 0};
  int64_t n_pages = 0;
};

// A pool of sequences of `lens` rows each (up to max_ctx), its pages handed
// out one at a time round the sequences so that theirs interleave, with 3
// spare pages; `ids` in the order of lens.
struct InterleavedPool {
  InterleavedPool(const std::vector<int64_t>& lens, int64_t max_ctx, int64_t page)
      : pool((max_ctx + page - 1) / page * static_cast<int64_t>(lens.size()) + 3, page) {
    for (size_t i = 0; i < lens.size(); ++i) ids.push_back(pool.create());
    for (bool more = true; more;) {
      more = false;
      for (size_t i = 0; i < lens.size(); ++i)
        if (pool.length(ids[i]) < lens[i]) {
          pool.append(ids[i], std::min<int64_t>(page, lens[i] - pool.length(ids[i])));
          more = true;
        }
    }
  }
  KvPagePool pool;
  std::vector<KvPagePool::SeqId> ids;
};

// q, k, v, the `outputs` (out, or split-K's part_o and part_ml), n_tokens,
// n_heads, n_kv_heads, max_ctx, kv_len, pos0, scale, window, block_table and
// n_pages when paged (k and v the pool), a q8_0 cache's k_scale, v_scale,
// q_scale and q_sum, and sinks when the case has them.
inline LaunchArgs attention_args(const AttentionCase& c, AttentionData& d,
                                 const LaunchArgs& outputs) {
  KvTensors& cache = c.page ? d.pool : d.cache;
  LaunchArgs a = {{"q", d.q.q}, {"k", cache.k}, {"v", cache.v}};
  a.insert(a.end(), outputs.begin(), outputs.end());
  a.insert(a.end(), {{"n_tokens", c.n_tokens},
                     {"n_heads", c.n_heads},
                     {"n_kv_heads", c.n_kv_heads},
                     {"max_ctx", c.rows()},
                     {"kv_len", c.kv_len},
                     {"pos0", c.pos0},
                     {"scale", c.scale()},
                     {"window", c.window}});
  if (c.page) a.insert(a.end(), {{"block_table", d.table}, {"n_pages", d.n_pages}});
  cache.add_scale_args(a);
  d.q.add_scale_args(a);
  if (c.sinks) a.emplace_back("sinks", d.sinks);
  return a;
}
inline LaunchArgs attention_args(const AttentionCase& c, AttentionData& d, HostBuffer& out) {
  return attention_args(c, d, {{"out", out}});
}

inline std::vector<double> attention_reference(const AttentionCase& c, const AttentionData& d) {
  const int64_t D = c.head_dim, group = c.n_heads / c.n_kv_heads;
  std::vector<double> out(c.n_tokens * c.n_heads * D);
  std::vector<double> s;
  for (int64_t t = 0; t < c.n_tokens; ++t)
    for (int64_t h = 0; h < c.n_heads; ++h) {
      const int64_t kvh = h / group, n = c.pos0 + t + 1, qb = (t * c.n_heads + h) * D;
      const int64_t j0 = c.window_begin(c.pos0 + t);
      s.assign(n, 0);
      const double sink = c.sinks ? d.sinks.get(h) : -INFINITY;
      double mx = sink, total = 0;
      for (int64_t j = j0; j < n; ++j) {
        for (int64_t i = 0; i < D; ++i) s[j] += d.q.get(qb + i) * d.key(c, j, kvh, i);
        s[j] *= c.scale();
        mx = std::max(mx, s[j]);
      }
      if (c.sinks) total = std::exp(sink - mx);
      for (int64_t j = j0; j < n; ++j) total += s[j] = std::exp(s[j] - mx);
      for (int64_t j = j0; j < n; ++j) {
        for (int64_t i = 0; i < D; ++i) out[qb + i] += s[j] / total * d.value(c, j, kvh, i);
      }
    }
  return out;
}

inline std::vector<double> as_doubles(const HostBuffer& b) {
  std::vector<double> r(b.size());
  for (int64_t i = 0; i < b.size(); ++i) r[i] = b.get(i);
  return r;
}

// The spec of `kernel` for the case's dtype and head size, plus `constexprs`.
inline Spec attention_spec(const std::string& kernel, const AttentionCase& c,
                           std::map<std::string, int64_t> constexprs = {}) {
  constexprs["HEAD_DIM"] = c.head_dim;
  if (c.sinks) constexprs["SINKS"] = 1;
  if (c.page) constexprs["PAGE"] = c.page;
  Spec s = find_kernel(kernel).make_spec({{"KV", c.kv}, {"T", c.act}}, constexprs);
  s.target = c.target;
  return s;
}

// Runs the launch compiled or through the interpreter; out starts as NaN so an
// element the kernel never writes fails any comparison.
inline HostBuffer run_attention(const Spec& spec, const AttentionCase& c, AttentionData& d,
                                bool interpret) {
  HostBuffer out(c.act, c.n_tokens * c.n_heads * c.head_dim);
  for (int64_t i = 0; i < out.size(); ++i) out.set(i, std::numeric_limits<double>::quiet_NaN());
  LaunchArgs args = attention_args(c, d, out);
  if (interpret)
    runtime().interpret(spec, args);
  else
    runtime().launch(spec, args);
  return out;
}

// Split-K decode: attention_decode_split with `constexprs`, then
// attention_decode_merge with its SPLIT. The partials start as NaN, so a
// slice the merge reads but the split never wrote fails the comparison.
inline HostBuffer run_split_attention(const AttentionCase& c, AttentionData& d, bool interpret,
                                      const std::map<std::string, int64_t>& constexprs = {},
                                      const std::string& pass1 = "attention_decode_split") {
  AttentionCase no_sinks = c;  // the sinks join in the merge
  no_sinks.sinks = false;
  Spec split = attention_spec(pass1, no_sinks, constexprs);
  const int64_t keys = split.constexpr_("SPLIT");
  Spec merge =
      find_kernel("attention_decode_merge")
          .make_spec({{"T", c.act}},
                     {{"HEAD_DIM", c.head_dim}, {"SPLIT", keys}, {"SINKS", c.sinks ? 1 : 0}});
  merge.target = c.target;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const int64_t rows = c.n_tokens * c.n_heads * ((c.rows() + keys - 1) / keys);
  HostBuffer part_o(DType::f32, rows * c.head_dim), part_ml(DType::f32, rows * 2),
      out(c.act, c.n_tokens * c.n_heads * c.head_dim);
  for (HostBuffer* b : {&part_o, &part_ml, &out})
    for (int64_t i = 0; i < b->size(); ++i) b->set(i, nan);
  // attention_args with out replaced by the two partials.
  LaunchArgs split_args = attention_args(no_sinks, d, {{"part_o", part_o}, {"part_ml", part_ml}});
  LaunchArgs merge_args = {{"part_o", part_o},       {"part_ml", part_ml},   {"out", out},
                           {"n_tokens", c.n_tokens}, {"n_heads", c.n_heads}, {"max_ctx", c.rows()},
                           {"kv_len", c.kv_len},     {"pos0", c.pos0},       {"window", c.window}};
  if (c.sinks) merge_args.emplace_back("sinks", d.sinks);
  if (interpret) {
    runtime().interpret(split, split_args);
    runtime().interpret(merge, merge_args);
  } else {
    runtime().launch(split, split_args);
    runtime().launch(merge, merge_args);
  }
  return out;
}

// `kernel` (attention_decode, attention_prefill, ..) with `constexprs`, or
// with kernel "split" or attention_decode_tiles a split-K pass 1 and the
// merge (run_split_attention).
inline HostBuffer run_any_attention(const std::string& kernel, const AttentionCase& c,
                                    AttentionData& d, bool interpret = false,
                                    const std::map<std::string, int64_t>& constexprs = {}) {
  if (kernel == "split") return run_split_attention(c, d, interpret, constexprs);
  if (kernel == "attention_decode_tiles")
    return run_split_attention(c, d, interpret, constexprs, kernel);
  return run_attention(attention_spec(kernel, c, constexprs), c, d, interpret);
}

// An absolute tolerance `atol` of f32 outputs widened by one unit in the
// last place (at 1) of narrower outputs: the results, in [-1, 1], are
// rounded to the activations' dtype once.
inline double output_atol(const AttentionCase& c, double atol) {
  return atol + (c.act == DType::f16 ? 0x1p-10 : c.act == DType::bf16 ? 0x1p-7 : 0);
}

// Compiled kernel vs the double reference, within an absolute tolerance.
inline void check_attention(const std::string& kernel, const AttentionCase& c, double atol,
                            const std::map<std::string, int64_t>& constexprs = {}) {
  INFO(kernel << " " << c.describe());
  AttentionData d(c);
  HostBuffer out = run_any_attention(kernel, c, d, false, constexprs);
  CHECK(worst_error(out, attention_reference(c, d), output_atol(c, atol), 0) <= 1.0);
}

// Compiled kernel vs the interpreter vs the double reference.
inline void check_attention_interpreted(const std::string& kernel, const AttentionCase& c,
                                        double atol,
                                        const std::map<std::string, int64_t>& constexprs) {
  INFO(kernel << " " << c.describe());
  AttentionData d(c);
  HostBuffer out = run_any_attention(kernel, c, d, false, constexprs),
             outi = run_any_attention(kernel, c, d, true, constexprs);
  CHECK(worst_error(out, as_doubles(outi), output_atol(c, atol), 0) <= 1.0);
  CHECK(worst_error(outi, attention_reference(c, d), output_atol(c, atol), 0) <= 1.0);
}

// The reference sweep every attention kernel passes: KV f16/bf16/f32/q8_0
// (or `kvs`), HEAD_DIM 64/128, GQA ratios 1 and 4, 1/7/33 tokens after an
// empty or a 45-token cache. The cache holds rows past the last query
// (kv_len > pos0 + n_tokens) and is allocated past kv_len; neither may be
// read. kv_len is off the key blocks.
inline void check_attention_sweep(const std::string& kernel, double atol,
                                  const TargetDesc& target = {},
                                  const std::vector<DType>& kvs = {DType::f16, DType::bf16,
                                                                   DType::f32, DType::i8}) {
  for (DType kv : kvs)
    for (int64_t D : {64, 128})
      for (auto [nh, nkv] : {std::pair{4, 4}, std::pair{8, 2}})
        for (int64_t nt : {1, 7, 33})
          for (int64_t pos0 : {0, 45}) {
            AttentionCase c{.kv = kv, .head_dim = D, .n_heads = nh, .n_kv_heads = nkv};
            c.target = target;
            c.n_tokens = nt;
            c.pos0 = pos0;
            c.kv_len = pos0 + nt + (pos0 ? 3 : 0);
            c.max_ctx = c.kv_len + 5;
            check_attention(kernel, c, atol);
          }
}

}  // namespace kiln::test
