// Stores a forward's new keys and values into the KV cache (kv_cache.h) at
// rows pos0 .. pos0 + n_tokens - 1, rounded to KV: xk and xv are f32
// [n_tokens, n_kv_heads, HEAD_DIM] (keys after RoPE). One program per
// (KV head, token); a key's elements land a key block apart, a value's
// contiguously. With PAGE > 0 the rows are the sequence's, in the pool
// pages its block_table lists (n_pages in the pool). With VARLEN = 1 (a
// serving step's packed batch, paged only) the tokens belong to n_seqs
// sequences: token t is row positions[t] of sequence tok_seq[t], whose
// pages are row tok_seq[t] of block_table [n_seqs][ceil(max_ctx / PAGE)];
// both are clamped into range, so a bad batch cannot write past its table
// row (the host checks tables, kv_page_pool.h). A q8_0 cache (KV = i8)
// gets each 32-element block's codes and its scale in k_scale / v_scale,
// rounded as llama.cpp rounds its q8_0 cache (q8_0_rounding.h).
#include <map>
#include <optional>
#include <string>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/quant/q8_0_rounding.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_kv_cache_store(const Spec& s) {
  KernelBuilder k("kv_cache_store", s);
  DType KV = s.dtype("KV");
  const int64_t D = s.constexpr_("HEAD_DIM");
  const int64_t KB = kv_key_block(s.target);
  check_attention_constexprs("kv_cache_store", D, attention_lanes(s.target), {});
  check_kv_layout("kv_cache_store", s);
  auto xk = k.buffer("xk", DType::f32), xv = k.buffer("xv", DType::f32);
  auto kc = k.buffer("k", KV), vc = k.buffer("v", KV);
  k.scalar("n_tokens", DType::i32);
  auto n_kv = k.scalar("n_kv_heads", DType::i32), max_ctx = k.scalar("max_ctx", DType::i32);
  const bool varlen = s.constexpr_("VARLEN") != 0;
  const int64_t page = s.constexpr_("PAGE");
  if (varlen && page <= 0)
    throw Error("kernel 'kv_cache_store': VARLEN = 1 writes a paged cache (PAGE > 0)");
  Value pos0, n_seqs;
  std::optional<Buffer> positions, tok_seq;
  if (varlen) {
    positions = k.buffer("positions", DType::i32);
    tok_seq = k.buffer("tok_seq", DType::i32);
    n_seqs = k.scalar("n_seqs", DType::i32);
  } else {
    pos0 = k.scalar("pos0", DType::i32);
  }
  KvView kv = declare_kv_view(k, s, kc, vc, max_ctx);
  auto h = k.program_id(0), t = k.program_id(1);
  kv.kvh = h;
  auto row = (t * n_kv + h).to(DType::i64) * D + arange(D).to(DType::i64);
  auto zero = full({}, 0, DType::i32);
  auto clamp = [&](const Value& x, const Value& hi) { return minimum(maximum(x, zero), hi - 1); };
  Value j = varlen ? clamp(load(*positions + t.to(DType::i64)), max_ctx) : pos0 + t;
  if (varlen) {
    auto seq = clamp(load(*tok_seq + t.to(DType::i64)), n_seqs);
    kv.table_row = seq.to(DType::i64) *
                   ((max_ctx + static_cast<int>(page - 1)) / static_cast<int>(page)).to(DType::i64);
  }
  const int kb = static_cast<int>(KB);
  auto koff = reshape(k_tile_offsets(kv, j / kb, 0, D, j % kb, 1), {D});
  auto voff = reshape(v_tile_offsets(kv, j, 1), {D});
  if (!kv.k_scale) {
    store(kc + koff, load(xk + row).to(KV));
    store(vc + voff, load(xv + row).to(KV));
    return k.finish();
  }
  const int64_t groups = D / kKvQuantBlock;
  KvView sv = kv;  // the scales, addressed as a cache of D / 32 dims
  sv.head_dim = groups;
  auto quantize = [&](const Buffer& x, const Buffer& codes, const Value& off, const Buffer& scales,
                      const Value& scale_off) {
    auto r = round_q8_0(reshape(load(x + row), {groups, kKvQuantBlock}));
    store(codes + off, reshape(r.codes, {D}).to(DType::i8));
    store(scales + scale_off, r.scale.to(DType::f16));
  };
  quantize(xk, kc, koff, *kv.k_scale,
           reshape(k_tile_offsets(sv, j / kb, 0, groups, j % kb, 1), {groups}));
  quantize(xv, vc, voff, *kv.v_scale, reshape(v_tile_offsets(sv, j, 1), {groups}));
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "kv_cache_store",
    .family = "attention",
    .summary = "new keys and values (f32) into the KV cache at rows pos0..",
    .dtype_roles = {{"KV", {DType::f16, DType::bf16, DType::f32, DType::i8}}},
    .constexpr_defaults = {{"HEAD_DIM", 128}, {"PAGE", 0}, {"VARLEN", 0}},
    .build = build_kv_cache_store,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          const int64_t n_tokens = a.i("n_tokens"), n_kv = a.i("n_kv_heads"),
                        max_ctx = a.i("max_ctx"), D = s.constexpr_("HEAD_DIM");
          const bool varlen = s.constexpr_("VARLEN") != 0;
          const int64_t n_seqs = varlen ? a.i("n_seqs") : 1;
          if (varlen && (n_seqs < 1 || n_seqs > n_tokens))
            throw Error("kernel 'kv_cache_store': n_seqs = " + std::to_string(n_seqs) + " for " +
                        std::to_string(n_tokens) + " tokens (need 1 .. n_tokens)");
          // A packed batch's rows are checked by the host against each
          // sequence's pages; one sequence's run must fit its cache.
          check_store_rows("kv_cache_store", n_tokens, n_kv, varlen ? n_tokens : max_ctx,
                           varlen ? 0 : a.i("pos0"));
          const int64_t x = n_tokens * n_kv * D, page = s.constexpr_("PAGE");
          if (page > 0) {
            const int64_t n_pages = pool_pages("kv_cache_store", a);
            std::map<std::string, int64_t> elems = {
                {"xk", x},
                {"xv", x},
                {"k", k_pool_elems(n_pages, n_kv, D, page)},
                {"v", v_pool_elems(n_pages, n_kv, D, page)},
                {"block_table", n_seqs * ((max_ctx + page - 1) / page)}};
            if (varlen) elems["positions"] = elems["tok_seq"] = n_tokens;
            return LaunchShape{{n_kv, n_tokens, 1}, with_kv_scales(elems)};
          }
          return LaunchShape{
              {n_kv, n_tokens, 1},
              with_kv_scales({{"xk", x},
                              {"xv", x},
                              {"k", k_cache_elems(max_ctx, n_kv, D, kv_key_block(s.target))},
                              {"v", v_cache_elems(max_ctx, n_kv, D)}})};
        },
    .shape_keys = {"n_tokens", "n_kv_heads"},
    // Exact: one rounding of each element to KV (a q8_0 block's: one scale
    // and one division, as the host reference).
    .rtol = 0,
    .atol = 0,
}));

}  // namespace
}  // namespace kiln
