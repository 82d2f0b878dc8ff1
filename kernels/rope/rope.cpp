// Rotary position embedding, in place, on x[tokens, heads, HEAD_DIM].
//
// One program rotates the first ROT dims of one (head, token) vector; the
// rest pass through. NEOX=0 pairs adjacent dims (2i, 2i+1) as llama's GGUF
// tensors expect; NEOX=1 pairs (i, i + ROT/2) as Qwen and GPT-NeoX do.
// Angles come from a host-built table (rope_cos_sin_table) because the IR
// has no sin/cos: row p holds cos(p*theta_i) for i < ROT/2, then sin.
// Positions outside the table are clamped to its last row (the table is
// built for the model's context length, so this never triggers in a forward).
#include "kernels/rope/rope.h"

#include <algorithm>
#include <cmath>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/registry.h"

namespace kiln {

std::vector<float> rope_cos_sin_table(double base, int64_t rot, int64_t n_pos,
                                      const RopeScaling& s) {
  std::vector<float> t(static_cast<size_t>(n_pos * rot));
  const int64_t half = rot / 2;
  const double n = static_cast<double>(rot), scale = 1 / s.factor;
  // Per pair: the share of the unscaled angle (YaRN's ramp, 0 for linear
  // scaling) and the factor on cos and sin.
  if (!s.freq_factors.empty() && static_cast<int64_t>(s.freq_factors.size()) != half)
    throw Error("RoPE: " + std::to_string(s.freq_factors.size()) + " frequency factors for " +
                std::to_string(half) + " rotated pairs");
  std::vector<double> keep(static_cast<size_t>(half), 0.0);
  double mscale = s.attn_factor;
  if (s.yarn) {
    // The pair whose wavelength fits orig_ctx `turns` times, as ggml's
    // ggml_rope_yarn_corr_dims rounds it.
    auto pair_of = [&](double turns) {
      return n * std::log(s.orig_ctx / (turns * 2 * M_PI)) / (2 * std::log(base));
    };
    const double low = std::max(0.0, std::floor(pair_of(s.beta_fast)));
    const double high = std::min(n - 1, std::ceil(pair_of(s.beta_slow)));
    for (int64_t i = 0; i < half; ++i)
      keep[i] =
          1 - std::clamp((static_cast<double>(i) - low) / std::max(0.001, high - low), 0.0, 1.0);
    mscale = s.attn_factor * (s.factor <= 1 ? 1 : 1 + 0.1 * std::log(s.factor));
  }
  for (int64_t p = 0; p < n_pos; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double ff = s.freq_factors.empty() ? 1.0 : s.freq_factors[i];
      const double extrap = static_cast<double>(p) * std::pow(base, -2.0 * i / n) / ff;
      const double theta = extrap * scale * (1 - keep[i]) + extrap * keep[i];
      t[p * rot + i] = static_cast<float>(std::cos(theta) * mscale);
      t[p * rot + half + i] = static_cast<float>(std::sin(theta) * mscale);
    }
  return t;
}

namespace {

Kernel build_rope(const Spec& s) {
  KernelBuilder k("rope", s);
  DType T = s.dtype("T");
  const int64_t D = s.constexpr_("HEAD_DIM"), R = s.constexpr_("ROT");
  const bool neox = s.constexpr_("NEOX") != 0;
  if (R <= 0 || R % 2 || R > D)
    throw Error("kernel 'rope': ROT must be even and in 2..HEAD_DIM, got " + std::to_string(R));
  const int half = static_cast<int>(R / 2);
  auto x = k.buffer("x", T), table = k.buffer("cos_sin", DType::f32),
       pos = k.buffer("pos", DType::i32);
  auto n_heads = k.scalar("n_heads", DType::i32);
  auto n_pos = k.scalar("n_pos", DType::i32);
  auto h = k.program_id(0), t = k.program_id(1);
  auto base = (t.to(DType::i64) * n_heads.to(DType::i64) + h.to(DType::i64)) * D;
  auto j = arange(R);
  auto freq = neox ? j % half : j >> 1;
  auto first = neox ? j < half : (j & 1) == 0;
  auto partner = neox ? (j + half) % static_cast<int>(R) : j ^ 1;
  auto p = minimum(maximum(load(pos + t), 0), n_pos - 1).to(DType::i64) * R;
  auto c = load(table + p + freq.to(DType::i64));
  auto sn = load(table + p + (freq + half).to(DType::i64));
  auto xv = load(x + base + j.to(DType::i64)).to(DType::f32);
  auto xp = load(x + base + partner.to(DType::i64)).to(DType::f32);
  store(x + base + j.to(DType::i64), (xv * c + where(first, -xp, xp) * sn).to(T));
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "rope",
    .family = "rope",
    .summary = "rotary embedding in place on x[tokens, heads, HEAD_DIM]",
    .dtype_roles = {{"T", {DType::f32, DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"HEAD_DIM", 128}, {"ROT", 128}, {"NEOX", 0}},
    .build = build_rope,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t tokens = a.i("tokens"), heads = a.i("n_heads");
          return LaunchShape{{heads, tokens, 1},
                             {{"x", tokens * heads * s.constexpr_("HEAD_DIM")},
                              {"cos_sin", a.i("n_pos") * s.constexpr_("ROT")},
                              {"pos", tokens}}};
        },
    .rtol = 1e-5,
}));

}  // namespace
}  // namespace kiln
