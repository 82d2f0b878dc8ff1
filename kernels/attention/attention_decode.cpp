// Causal GQA attention for token generation: each query token against the
// KV cache, out = softmax(q K^T * scale + causal mask) V per query head.
//
// Every token streams the whole cache, and all query heads of a GQA group
// read the same K/V rows, so a program owns one KV head, one token and up to
// BLOCK_G of the heads that share it: each block of BLOCK_N cache rows is
// loaded once (whole contiguous rows, f16 widened to f32 once) and then
// visited by each head of the program in a run-time loop. Per head, the
// scores of the block are FMAs over HEAD_DIM into one 16-lane partial per
// key, folded to one score per key by a halving tree shared by all keys
// (a `dot` with K^T would need the K block transposed, which costs the CPU
// more shuffles than the tree); then an online softmax (running max m and
// sum l, exp2 with log2(e) folded into the scale) and acc = acc * alpha +
// p V as a [1, BLOCK_N] x [BLOCK_N, HEAD_DIM] `dot`.
//
// A head's accumulator lives in its own `out` row between key blocks (so
// out must not overlap q, k or v): with one head in flight at a time its
// state fits in registers, and a last pass divides each row by l. The m and
// l of the program's heads are lanes of two [BLOCK_G] vectors. Blocks inside
// the causal limit use plain vector loads; only the last, partial block is
// masked. Token t sees keys [0, min(pos0 + t + 1, kv_len)), so n_tokens > 1
// works, each token on its own.
#include <cmath>
#include <limits>

#include "ir/builder.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/lane_fold.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

constexpr int64_t kLanes = kAttentionLanes;

Kernel build_attention_decode(const Spec& s) {
  KernelBuilder k("attention_decode", s);
  DType KV = s.dtype("KV");
  const int64_t D = s.constexpr_("HEAD_DIM"), BN = s.constexpr_("BLOCK_N"),
                BG = s.constexpr_("BLOCK_G");
  check_attention_constexprs("attention_decode", D, {{"BLOCK_N", BN}, {"BLOCK_G", BG}});
  const double neg_inf = -std::numeric_limits<double>::infinity();
  auto q = k.buffer("q", DType::f32), kc = k.buffer("k", KV), vc = k.buffer("v", KV),
       out = k.buffer("out", DType::f32);
  k.scalar("n_tokens", DType::i32);
  auto n_heads = k.scalar("n_heads", DType::i32), n_kv = k.scalar("n_kv_heads", DType::i32);
  auto kv_len = k.scalar("kv_len", DType::i32), pos0 = k.scalar("pos0", DType::i32);
  auto scale = k.scalar("scale", DType::f32);

  auto kvh = k.program_id(0), t = k.program_id(2);
  auto group = n_heads / n_kv;
  auto g0 = k.program_id(1) * static_cast<int>(BG);
  auto n_g = minimum(group - g0, static_cast<int>(BG));  // heads of this program
  auto head0 = kvh * group + g0;
  auto cols = arange(D).to(DType::i64);
  auto q_row = [&](const Value& g) { return (t * n_heads + head0 + g).to(DType::i64) * D + cols; };
  auto limit = minimum(pos0 + t + 1, kv_len);  // keys [0, limit)
  auto kv_row0 = kvh.to(DType::i64) * D + cols;
  auto kv_stride = n_kv.to(DType::i64) * D;
  auto qscale = scale * static_cast<float>(M_LOG2E);

  k.for_(0, n_g, 1, [&](Value g) { store(out + q_row(g), zeros(DType::f32, {D})); });
  auto m = k.var(full({BG}, neg_inf, DType::f32));
  auto l = k.var(zeros(DType::f32, {BG}));
  auto pick = [&](const Value& vec, const Value& sel) {  // the lane sel selects
    return sum(where(sel, vec, zeros(DType::f32, {BG})));
  };

  auto key_block = [&](const Value& j0, bool masked) {
    auto keys = j0 + arange(BN);
    auto kmask = keys < limit;
    auto off = expand_dims(keys.to(DType::i64) * kv_stride, 1) + kv_row0;  // [BN, D]
    auto rows = [&](const Buffer& b) {
      return (masked ? load(b + off, expand_dims(kmask, 1), 0.0) : load(b + off)).to(DType::f32);
    };
    auto kt = rows(kc), vt = rows(vc);
    k.for_(0, n_g, 1, [&](Value g) {
      auto orow = q_row(g);
      auto qg = reshape(load(q + orow) * qscale, {1, D});
      Value part = zeros(DType::f32, {BN, kLanes});
      for (int64_t c = 0; c < D; c += kLanes)
        part = fma(slice(kt, {0, c}, {BN, kLanes}),
                   broadcast_to(slice(qg, {0, c}, {1, kLanes}), {BN, kLanes}), part);
      Value sc = fold_last_axis(part, Fold::Sum);  // log2-scaled scores
      if (masked) sc = where(kmask, sc, full({BN}, neg_inf, DType::f32));
      auto sel = arange(BG) == g;
      Value mv = m, lv = l;
      auto m_old = pick(mv, sel);
      auto m_new = maximum(m_old, fold_last_axis(sc, Fold::Max));
      // A head that has seen only masked keys keeps m = -inf; subtracting 0
      // instead keeps exp2 away from -inf - -inf (NaN).
      auto m_sub = where(m_new > neg_inf, m_new, zeros(DType::f32, {}));
      auto alpha = exp2(m_old - m_sub);
      auto p = exp2(sc - m_sub);
      l = where(sel, pick(lv, sel) * alpha + fold_last_axis(p, Fold::Sum), lv);
      m = where(sel, m_new, mv);
      auto acc = reshape(load(out + orow) * alpha, {1, D});
      store(out + orow, reshape(dot(reshape(p, {1, BN}), vt, acc), {D}));
    });
  };
  auto full_end = limit - limit % static_cast<int>(BN);
  k.for_(0, full_end, BN, [&](Value j0) { key_block(j0, false); });
  k.if_(full_end < limit, [&] { key_block(full_end, true); });

  k.for_(0, n_g, 1, [&](Value g) {
    auto orow = q_row(g);
    Value lv = l;
    auto lg = pick(lv, arange(BG) == g);
    auto inv = where(lg > 0.0f, 1.0f / lg, zeros(DType::f32, {}));
    store(out + orow, load(out + orow) * inv);
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "attention_decode",
    .family = "attention",
    .summary = "causal GQA attention of few tokens over a KV cache, K/V rows shared by a group",
    .dtype_roles = {{"KV", {DType::f16, DType::f32}}},
    .constexpr_defaults = {{"HEAD_DIM", 128}, {"BLOCK_N", 32}, {"BLOCK_G", 8}},
    .build = build_attention_decode,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          AttentionSizes z = attention_sizes("attention_decode", s, a);
          return LaunchShape{{z.n_kv_heads, cdiv(z.group, s.constexpr_("BLOCK_G")), z.n_tokens},
                             z.buffer_elems()};
        },
    .tunables = {{"BLOCK_N", {8, 16, 32, 64}}, {"BLOCK_G", {1, 2, 4, 8, 16}}},
    .shape_keys = {"kv_len", "n_heads", "n_kv_heads"},
    // f32 dot products over HEAD_DIM, the vector exp2 (~2.5e-7 relative) and
    // f32 sums over kv_len; reassociated against the interpreter by the
    // lane tree and FMA contraction.
    .rtol = 1e-4,
    .atol = 1e-5,
}));

}  // namespace
}  // namespace kiln
