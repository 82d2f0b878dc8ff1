// AURA's dequant mirror (AURA.md section 5): rows 0 .. kv_len - 1 of an AURA
// cache decoded into an ordinary cache (kv_cache.h's layout, KV = f32, f16
// or bf16, HEAD_DIM = the rotated D), each element norm * C[code], still in
// the rotated space. Any attention kernel over it, with q rotated by the
// keys' rotation and the output rotated back, computes what the compressed
// kernels compute: the oracle they are tested against, and the fallback a
// backend without compressed kernels would run (re-reading and re-writing
// dense K and V, so it saves memory only at rest). One program per (KV head,
// key).
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/aura/aura_codes.h"
#include "kernels/aura/aura_format.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_aura_dequant(const Spec& s) {
  KernelBuilder k("aura_dequant", s);
  const int64_t D = s.constexpr_("HEAD_DIM"), KB = kv_key_block(s.target);
  DType KV = s.dtype("KV");
  check_aura_spec("aura_dequant", s, D);
  auto kc = k.buffer("k", DType::u32), vc = k.buffer("v", DType::u32);
  auto kn = k.buffer("k_scale", DType::f16), vn = k.buffer("v_scale", DType::f16);
  auto ko = k.buffer("k_out", KV), vo = k.buffer("v_out", KV);
  k.scalar("n_kv_heads", DType::i32);
  auto max_ctx = k.scalar("max_ctx", DType::i32);
  k.scalar("kv_len", DType::i32);
  auto h = k.program_id(0), j = k.program_id(1);
  KvView out{.k = ko, .v = vo, .kvh = h, .max_ctx = max_ctx, .head_dim = D, .key_block = KB};
  auto row = h.to(DType::i64) * max_ctx.to(DType::i64) + j.to(DType::i64);
  auto decode = [&](const Buffer& codes, const Buffer& norms, int bits) {
    const int64_t W = packed_words(D, bits);
    auto words = reshape(load(codes + (row * W + arange(W).to(DType::i64))), {1, W});
    auto c = reshape(aura_centroids(aura_unpack(words, bits, D), bits, D), {D});
    return c * broadcast_to(load(norms + row).to(DType::f32), {D});
  };
  const int kb = static_cast<int>(KB);
  auto koff = reshape(k_tile_offsets(out, j / kb, 0, D, j % kb, 1), {D});
  auto voff = reshape(v_tile_offsets(out, j, 1), {D});
  store(ko + koff, decode(kc, kn, static_cast<int>(s.constexpr_("KBITS"))).to(KV));
  store(vo + voff, decode(vc, vn, static_cast<int>(s.constexpr_("VBITS"))).to(KV));
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "aura_dequant",
    .family = "aura",
    .summary = "AURA's dequant mirror: a compressed cache's rows decoded into an f32/f16/bf16 "
               "cache, in the rotated space",
    .dtype_roles = {{"KV", {DType::f32, DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"HEAD_DIM", 128}, {"KBITS", 4}, {"VBITS", 4}},
    .build = build_aura_dequant,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          const int64_t n_kv = a.i("n_kv_heads"), ctx = a.i("max_ctx"), len = a.i("kv_len");
          const int64_t D = s.constexpr_("HEAD_DIM");
          if (n_kv < 1 || len < 1 || len > ctx)
            throw Error("kernel 'aura_dequant': n_kv_heads = " + std::to_string(n_kv) +
                        ", kv_len = " + std::to_string(len) + ", max_ctx = " + std::to_string(ctx) +
                        " (need n_kv_heads >= 1, 1 <= kv_len <= max_ctx)");
          const int64_t rows = n_kv * ctx;
          const int kb = static_cast<int>(s.constexpr_("KBITS")),
                    vb = static_cast<int>(s.constexpr_("VBITS"));
          return LaunchShape{{n_kv, len, 1},
                             {{"k", rows * packed_words(D, kb)},
                              {"v", rows * packed_words(D, vb)},
                              {"k_scale", rows},
                              {"v_scale", rows},
                              {"k_out", k_cache_elems(ctx, n_kv, D, kv_key_block(s.target))},
                              {"v_out", v_cache_elems(ctx, n_kv, D)}}};
        },
    .shape_keys = {"kv_len", "n_kv_heads"},
    // Exact: one product per element, rounded once to KV.
    .rtol = 0,
    .atol = 0,
}));

}  // namespace
}  // namespace kiln
