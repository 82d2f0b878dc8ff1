// Split-K decode attention (flash-decoding): the causal range of each query
// token is cut into slices of SPLIT keys, a program per (BLOCK_G heads,
// slice, KV head, token) walks its slice (kv_walk.h) and writes the
// slice's unnormalised state, and attention_decode_merge combines the
// slices of each head: with M = max_s m_s,
//   out = sum_s 2^(m_s - M) O_s / sum_s 2^(m_s - M) l_s.
//
// Why: attention_decode gives a program a whole KV head, so a model with
// few KV heads leaves threads (and a GPU's SMs) idle, and when BLOCK_G is
// smaller than the group the group's programs each stream the whole cache
// from DRAM. Here the programs of one slice's heads are adjacent in the
// grid, so the slice (SPLIT keys, 128 KiB at HEAD_DIM 128 in f16 at 256
// keys) is read from DRAM once and from cache by the rest of its group,
// and there are as many programs as slices.
//
// The partials (decode_split.h): a slice outside a token's range (past its
// causal limit, for a token before the last, or before its sliding window)
// stores m = -inf, l = 0 and O = 0. Sinks (attention_sinks.h) join in the
// merge. attention_decode_tiles writes the same partials with tile dots.
#include <cmath>
#include <limits>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/attention_sinks.h"
#include "kernels/attention/attention_window.h"
#include "kernels/attention/decode_split.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/attention/kv_walk.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_attention_decode_split(const Spec& s) {
  KernelBuilder k("attention_decode_split", s);
  const SplitPass p = declare_split_pass(k, s, "attention_decode_split");
  const int64_t D = p.head_dim, BG = p.block_g;
  auto g0 = k.program_id(0) * static_cast<int>(BG);
  auto slices = split_slices(p);
  std::vector<Value> heads;
  WalkInputs in = decode_inputs(s, p.q, p.sc, p.kvh, p.t, g0, heads);
  std::vector<Value> part;  // each head's partial row (i64)
  for (const Value& head : heads)
    part.push_back((p.t * p.sc.n_heads + head).to(DType::i64) * slices.to(DType::i64) +
                   p.slice.to(DType::i64));
  WalkState st = walk_start(k, BG, D);
  const SliceKeys keys = split_keys(p);
  walk_keys(k, in, keys.begin, keys.end, st);
  for (int64_t h = 0; h < BG; ++h) {
    auto valid = g0 + static_cast<int>(h) < p.group;
    store(p.part_o + (part[h] * D + arange(D).to(DType::i64)), walk_output(in, st, h),
          broadcast_to(valid, {D}));
    auto ml =
        where(arange(2) == 0, broadcast_to(Value(st.m[h]), {2}), broadcast_to(Value(st.l[h]), {2}));
    store(p.part_ml + (part[h] * 2 + arange(2).to(DType::i64)), ml, broadcast_to(valid, {2}));
  }
  return k.finish();
}

// One program per (head, token): the slices that token's range covers,
// merged in slice order (so the result does not depend on the thread
// count), then normalised with the head's sink if any.
Kernel build_attention_decode_merge(const Spec& s) {
  KernelBuilder k("attention_decode_merge", s);
  const int64_t D = s.constexpr_("HEAD_DIM"), SPLIT = s.constexpr_("SPLIT");
  check_attention_constexprs("attention_decode_merge", D, attention_lanes(s.target), {});
  check_split("attention_decode_merge", SPLIT, kv_key_block(s.target));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  auto part_o = k.buffer("part_o", DType::f32), part_ml = k.buffer("part_ml", DType::f32);
  auto out = k.buffer("out", s.dtype("T"));
  k.scalar("n_tokens", DType::i32);
  auto n_heads = k.scalar("n_heads", DType::i32);
  auto max_ctx = k.scalar("max_ctx", DType::i32);
  auto kv_len = k.scalar("kv_len", DType::i32), pos0 = k.scalar("pos0", DType::i32);
  auto window = k.scalar("window", DType::i32);
  auto sinks = declare_sinks(k, s);
  auto head = k.program_id(0), t = k.program_id(1);
  const int sp = static_cast<int>(SPLIT);
  auto slices = (max_ctx + (sp - 1)) / sp;
  auto pos = pos0 + t;
  auto first = window_begin(pos, window) / sp;
  auto used = (minimum(pos + 1, kv_len) + (sp - 1)) / sp;
  auto row = (t * n_heads + head).to(DType::i64) * slices.to(DType::i64);
  auto m_at = [&](const Value& sl) { return load(part_ml + ((row + sl.to(DType::i64)) * 2)); };
  auto mx = k.var(full({}, neg_inf, DType::f32));
  k.for_(first, used, 1, [&](Value sl) { mx = maximum(Value(mx), m_at(sl)); });
  // Every token sees its own key, so its slice is not empty and mx is finite.
  auto acc = k.var(zeros(DType::f32, {D}));
  auto l = k.var(zeros(DType::f32, {}));
  k.for_(first, used, 1, [&](Value sl) {
    auto at = row + sl.to(DType::i64);
    auto w = exp2(m_at(sl) - Value(mx));
    l = fma(w, load(part_ml + (at * 2 + 1)), Value(l));
    acc = fma(broadcast_to(w, {D}), load(part_o + (at * D + arange(D).to(DType::i64))), Value(acc));
  });
  auto inv = softmax_normaliser(mx, l, sink_logit(sinks, head));
  store(out + ((t * n_heads + head).to(DType::i64) * D + arange(D).to(DType::i64)),
        (Value(acc) * broadcast_to(inv, {D})).to(out.dtype()));
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "attention_decode_split",
    .family = "attention",
    .summary = "split-K decode attention, pass 1: each slice of SPLIT keys of a KV head's cache "
               "into unnormalised partial states (m, l, O) of its group's heads",
    .dtype_roles = {{"KV", {DType::f16, DType::bf16, DType::f32, DType::i8, DType::u32}},
                    kActivationRole},
    .constexpr_defaults = {{"HEAD_DIM", 128},
                           {"BLOCK_G", 2},
                           {"SPLIT", 512},
                           {"PREFETCH", 2},
                           {"PAGE", 0},
                           {"KBITS", 4},
                           {"VBITS", 4}},
    .build = build_attention_decode_split,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          return decode_split_launch_shape("attention_decode_split", s, a);
        },
    .shape_heuristic = decode_block_g,
    .tunables = {{"BLOCK_G", {1, 2, 4, 8}}, {"PREFETCH", {0, 1, 2}}},
    .shape_keys = {"kv_len", "n_heads", "n_kv_heads"},
    // As attention_decode (f32 sums of exp2-weighted rows), per slice.
    .rtol = 1e-4,
    .atol = 1e-5,
}));

KILN_REGISTER_KERNEL((KernelDef{
    .name = "attention_decode_merge",
    .family = "attention",
    .summary = "split-K decode attention, pass 2: out = the partial states of each head's slices "
               "merged and normalised",
    .dtype_roles = {kActivationRole},
    .constexpr_defaults = {{"HEAD_DIM", 128}, {"SPLIT", 512}, {"SINKS", 0}},
    .build = build_attention_decode_merge,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          const int64_t t = a.i("n_tokens"), h = a.i("n_heads"), ctx = a.i("max_ctx");
          const int64_t kv_len = a.i("kv_len"), pos0 = a.i("pos0"), d = s.constexpr_("HEAD_DIM");
          check_window("attention_decode_merge", a.i("window"));
          const std::string who = "kernel 'attention_decode_merge': ";
          if (t < 1 || h < 1) throw Error(who + "n_tokens and n_heads must be >= 1");
          if (pos0 < 0 || pos0 + t > kv_len || kv_len > ctx)
            throw Error(who + "pos0 + n_tokens = " + std::to_string(pos0 + t) +
                        " must lie within kv_len = " + std::to_string(kv_len) +
                        " <= max_ctx = " + std::to_string(ctx));
          const int64_t rows = decode_partial_rows(t, h, ctx, s.constexpr_("SPLIT"));
          return LaunchShape{
              {h, t, 1},
              {{"part_o", rows * d}, {"part_ml", rows * 2}, {"out", t * h * d}, {"sinks", h}}};
        },
    .shape_keys = {"kv_len", "n_heads"},
    // exp2 weights and f32 sums over the slices.
    .rtol = 1e-5,
    .atol = 1e-6,
}));

}  // namespace
}  // namespace kiln
