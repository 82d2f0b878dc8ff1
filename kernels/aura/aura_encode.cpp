// AURA's encoder (AURA.md section 4): a forward's new keys and values into
// the compressed cache (aura_format.h's layout) at rows pos0 ..
// pos0 + n_tokens - 1. Per vector x (HEAD_DIM dims, zero-padded to D): its
// norm, the rotated direction y = Pi (x / ||x||), each y_i's code, and the
// corrected norm ||x|| / ||C[codes]||. One program per (KV head, token)
// encodes its key (KBITS) and its value (VBITS), each kind with its own
// rotation (k_rot, v_rot: the forward matrices, f32 [D, D]).
//
// The rotation is a matrix product, D^2 FMAs per vector (a few per cent of
// a decode step at D = 128); all of it, the norms and the threshold
// compares are f32 (AURA.md pitfall 9).
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/aura/aura_codes.h"
#include "kernels/aura/aura_format.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

void check_aura_constexprs(const std::string& kernel, const Spec& s) {
  const int64_t d = s.constexpr_("HEAD_DIM");
  if (d < 1 || d > 4096)
    throw Error("kernel '" + kernel + "': HEAD_DIM = " + std::to_string(d) + " (need 1 .. 4096)");
  check_aura_spec(kernel, s, aura_padded_dim(d));
}

Kernel build_aura_encode(const Spec& s) {
  check_aura_constexprs("aura_encode", s);
  KernelBuilder k("aura_encode", s);
  const int64_t d = s.constexpr_("HEAD_DIM"), D = aura_padded_dim(d);
  DType T = s.dtype("T");
  auto xk = k.buffer("xk", T), xv = k.buffer("xv", T);
  auto kc = k.buffer("k", DType::u32), vc = k.buffer("v", DType::u32);
  auto kn = k.buffer("k_scale", DType::f16), vn = k.buffer("v_scale", DType::f16);
  auto k_rot = k.buffer("k_rot", DType::f32), v_rot = k.buffer("v_rot", DType::f32);
  k.scalar("n_tokens", DType::i32);
  auto n_kv = k.scalar("n_kv_heads", DType::i32), max_ctx = k.scalar("max_ctx", DType::i32);
  auto pos0 = k.scalar("pos0", DType::i32);
  auto h = k.program_id(0), t = k.program_id(1);
  auto x_row = (t * n_kv + h).to(DType::i64) * d;
  auto cache_row = h.to(DType::i64) * max_ctx.to(DType::i64) + (pos0 + t).to(DType::i64);
  auto lanes = arange(D);

  auto encode = [&](const Buffer& x, const Buffer& rot, const Buffer& codes, const Buffer& norms,
                    int bits) {
    auto xs = load(x + (x_row + lanes.to(DType::i64)), lanes < d, 0.0).to(DType::f32);
    auto nu = sqrt(sum(xs * xs));
    auto live = nu > 1e-8f;
    auto inv = where(live, 1.0f / maximum(nu, 1e-8f), zeros(DType::f32, {}));
    // y = Pi u, one input coordinate (one row of the forward matrix) at a
    // time.
    auto y = k.var(zeros(DType::f32, {D}));
    k.for_(0, static_cast<int>(d), 1, [&](Value j) {
      auto uj = load(x + (x_row + j.to(DType::i64))).to(DType::f32) * inv;
      auto row = load(rot + (j.to(DType::i64) * D + lanes.to(DType::i64)));
      y = fma(broadcast_to(uj, {D}), row, Value(y));
    });
    auto code = aura_quantize(y, bits, D);
    auto c = aura_centroids(code, bits, D);
    auto rho = sqrt(sum(c * c));
    auto corrected = where(rho > 1e-8f, nu / maximum(rho, 1e-8f), nu);
    const int64_t W = packed_words(D, bits);
    store(codes + (cache_row * W + arange(W).to(DType::i64)), aura_pack(code, bits));
    store(norms + cache_row, corrected.to(DType::f16));
  };
  encode(xk, k_rot, kc, kn, static_cast<int>(s.constexpr_("KBITS")));
  encode(xv, v_rot, vc, vn, static_cast<int>(s.constexpr_("VBITS")));
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "aura_encode",
    .family = "aura",
    .summary = "new keys and values into AURA's compressed KV cache at rows pos0..: rotated, "
               "Lloyd-Max coded, corrected norms",
    .dtype_roles = {{"T", {DType::f32, DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"HEAD_DIM", 128}, {"KBITS", 4}, {"VBITS", 4}},
    .build = build_aura_encode,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          check_aura_constexprs("aura_encode", s);
          const int64_t n_tokens = a.i("n_tokens"), n_kv = a.i("n_kv_heads"),
                        max_ctx = a.i("max_ctx"), pos0 = a.i("pos0"), d = s.constexpr_("HEAD_DIM");
          check_store_rows("aura_encode", n_tokens, n_kv, max_ctx, pos0);
          const int64_t D = aura_padded_dim(d), rows = n_kv * max_ctx, x = n_tokens * n_kv * d;
          const int kb = static_cast<int>(s.constexpr_("KBITS")),
                    vb = static_cast<int>(s.constexpr_("VBITS"));
          return LaunchShape{{n_kv, n_tokens, 1},
                             {{"xk", x},
                              {"xv", x},
                              {"k", rows * packed_words(D, kb)},
                              {"v", rows * packed_words(D, vb)},
                              {"k_scale", rows},
                              {"v_scale", rows},
                              {"k_rot", D * D},
                              {"v_rot", D * D}}};
        },
    .shape_keys = {"n_tokens", "n_kv_heads"},
    // Codes are exact functions of f32 sums: a coordinate within rounding
    // of a threshold may take the neighbouring code (AURA.md pitfall 14),
    // which tests allow for; norms are f16.
    .rtol = 0,
    .atol = 0,
}));

}  // namespace
}  // namespace kiln
