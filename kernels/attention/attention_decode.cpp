// Causal GQA attention for token generation: each query token against the
// KV cache, out = softmax(q K^T * scale + causal mask) V per query head.
//
// Every token streams the whole cache, and all query heads of a GQA group
// read the same K/V rows, so a program owns one KV head, one token and
// BLOCK_G of the heads that share it, and walks the cache once with the
// state of all its heads (kv_walk.h); each head's scores take a register
// in the score loop, which bounds BLOCK_G (attention_shape.cpp measures
// it). With few programs for the threads (few KV heads) or a long cache,
// attention_decode_split (flash-decoding) divides the walk instead.
//
// With PREFETCH > 0 the unmasked blocks prefetch the block PREFETCH
// blocks ahead, its K a piece per step of the score loop and its V a piece
// per step of P V (kv_cache.h's prefetch_k_block and prefetch_v_block).
// Token t sees keys
// [window_begin(pos0 + t), min(pos0 + t + 1, kv_len)) (attention_window.h),
// so n_tokens > 1 works, each token on its own; with SINKS the heads' sinks
// join the normalisation (attention_sinks.h). Heads past the group (the
// last program's padding) read their group's last q row and are not stored.
#include <algorithm>
#include <cmath>

#include "ir/builder.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/attention_sinks.h"
#include "kernels/attention/attention_window.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/attention/kv_walk.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_attention_decode(const Spec& s) {
  KernelBuilder k("attention_decode", s);
  DType KV = s.dtype("KV");
  const int64_t D = s.constexpr_("HEAD_DIM"), BG = s.constexpr_("BLOCK_G");
  check_attention_constexprs("attention_decode", D, attention_lanes(s.target), {{"BLOCK_G", BG}});
  check_kv_layout("attention_decode", s);
  auto q = k.buffer("q", query_dtype(s)), kc = k.buffer("k", KV), vc = k.buffer("v", KV),
       out = k.buffer("out", s.dtype("T"));
  DecodeScalars sc = declare_decode_scalars(k, s, kc, vc);
  auto sinks = declare_sinks(k, s);

  // The programs of one KV head are adjacent in the grid, so its cache comes
  // from DRAM once and is still in cache for the next of them.
  auto kvh = k.program_id(1), t = k.program_id(2);
  auto group = sc.n_heads / sc.n_kv;
  auto g0 = k.program_id(0) * static_cast<int>(BG);
  std::vector<Value> heads;
  WalkInputs in = decode_inputs(s, q, sc, kvh, t, g0, heads);
  WalkState st = walk_start(k, BG, D);
  auto pos = sc.pos0 + t;
  walk_keys(k, in, window_begin(pos, sc.window), minimum(pos + 1, sc.kv_len), st);
  decode_finish(in, st, out, sinks, heads, g0, group);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "attention_decode",
    .family = "attention",
    .summary = "causal GQA attention of few tokens over a KV cache, K/V blocks shared by a group",
    .dtype_roles = {{"KV", {DType::f16, DType::bf16, DType::f32, DType::i8, DType::u32}},
                    kActivationRole},
    .constexpr_defaults = {{"HEAD_DIM", 128},
                           {"BLOCK_G", 2},
                           {"PREFETCH", 2},
                           {"SINKS", 0},
                           {"PAGE", 0},
                           {"KBITS", 4},
                           {"VBITS", 4}},
    .build = build_attention_decode,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          AttentionSizes z = attention_sizes("attention_decode", s, a);
          return LaunchShape{{cdiv(z.group, s.constexpr_("BLOCK_G")), z.n_kv_heads, z.n_tokens},
                             z.buffer_elems()};
        },
    .shape_heuristic = decode_block_g,
    // Without prefetches the loads of a block wait on DRAM while the core
    // computes, and compute and memory take turns (kiln bench, cold, Xeon,
    // 2 threads, 32x8x128 heads, 4096 and 32768 keys, fraction of the
    // probe: f16 0.57 at 0, 0.70-0.76 at 1, 0.70-0.86 at 2, 0.74-0.76 at
    // 4; q8_0 0.46, 0.51-0.57, 0.61-0.63, 0.60-0.62).
    .tunables = {{"BLOCK_G", {1, 2, 4, 8}}, {"PREFETCH", {0, 1, 2}}},
    .shape_keys = {"kv_len", "n_heads", "n_kv_heads"},
    // f32 dot products over HEAD_DIM, the vector exp2 (~2.5e-7 relative) and
    // f32 sums over kv_len; reassociated against the interpreter by the
    // lane tree and FMA contraction.
    .rtol = 1e-4,
    .atol = 1e-5,
}));

}  // namespace
}  // namespace kiln
