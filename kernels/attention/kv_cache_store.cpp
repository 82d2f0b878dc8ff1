// Stores a forward's new keys and values into the KV cache (kv_cache.h) at
// rows pos0 .. pos0 + n_tokens - 1, rounded to KV: xk and xv are f32
// [n_tokens, n_kv_heads, HEAD_DIM] (keys after RoPE). One program per
// (KV head, token); a key's elements land a key block apart, a value's
// contiguously. With PAGE > 0 the rows are the sequence's, in the pool
// pages its block_table lists (n_pages in the pool). A q8_0 cache (KV = i8)
// gets each 32-element block's codes and its scale in k_scale / v_scale,
// rounded as llama.cpp rounds its q8_0 cache (q8_0_rounding.h).
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
  auto pos0 = k.scalar("pos0", DType::i32);
  KvView kv = declare_kv_view(k, s, kc, vc, n_kv, max_ctx);
  auto h = k.program_id(0), t = k.program_id(1);
  kv.kvh = h;
  auto row = (t * n_kv + h).to(DType::i64) * D + arange(D).to(DType::i64);
  auto j = pos0 + t;
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
    .constexpr_defaults = {{"HEAD_DIM", 128}, {"PAGE", 0}},
    .build = build_kv_cache_store,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          const int64_t n_tokens = a.i("n_tokens"), n_kv = a.i("n_kv_heads"),
                        max_ctx = a.i("max_ctx"), pos0 = a.i("pos0"), D = s.constexpr_("HEAD_DIM");
          check_store_rows("kv_cache_store", n_tokens, n_kv, max_ctx, pos0);
          const int64_t x = n_tokens * n_kv * D, page = s.constexpr_("PAGE");
          if (page > 0) {
            const int64_t n_pages = pool_pages("kv_cache_store", a);
            return LaunchShape{{n_kv, n_tokens, 1},
                               with_kv_scales({{"xk", x},
                                               {"xv", x},
                                               {"k", k_pool_elems(n_pages, n_kv, D, page)},
                                               {"v", v_pool_elems(n_pages, n_kv, D, page)},
                                               {"block_table", (max_ctx + page - 1) / page}})};
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
