// One decode step of a batch of sequences, as a serving engine runs it:
// query token s is sequence s's newest, at position seq_len[s] - 1, and
// attends to that sequence's keys 0 .. seq_len[s] - 1 (its new key stored
// first) in its pages of a paged pool (PAGE > 0, kv_cache.h):
// block_table [n_seqs][ceil(max_ctx / PAGE)], a row per sequence.
//
// attention_decode's program per (BLOCK_G heads, KV head, token) and its
// walk (kv_walk.h), with the token's own table row and length: every
// head of a GQA group shares each K/V load, and the n_seqs * n_kv_heads
// programs spread a batch over the threads without splitting the keys. A
// length outside 1 .. max_ctx is clamped into it, so a bad batch cannot
// read past its table row (the host checks tables, kv_page_pool.h).
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/attention_sinks.h"
#include "kernels/attention/attention_window.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/attention/kv_walk.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

const char* const kName = "attention_decode_batch";

Kernel build_attention_decode_batch(const Spec& s) {
  KernelBuilder k(kName, s);
  DType KV = s.dtype("KV");
  const int64_t D = s.constexpr_("HEAD_DIM"), BG = s.constexpr_("BLOCK_G");
  check_attention_constexprs(kName, D, attention_lanes(s.target), {{"BLOCK_G", BG}});
  check_kv_layout(kName, s);
  const int page = static_cast<int>(s.constexpr_("PAGE"));
  if (page <= 0)
    throw Error(std::string("kernel '") + kName + "' reads a paged cache: PAGE must be > 0");
  auto q = k.buffer("q", query_dtype(s)), kc = k.buffer("k", KV), vc = k.buffer("v", KV),
       out = k.buffer("out", s.dtype("T")), seq_len = k.buffer("seq_len", DType::i32);
  k.scalar("n_seqs", DType::i32);
  auto n_heads = k.scalar("n_heads", DType::i32), n_kv = k.scalar("n_kv_heads", DType::i32);
  auto max_ctx = k.scalar("max_ctx", DType::i32);
  auto scale = k.scalar("scale", DType::f32);
  auto window = k.scalar("window", DType::i32);
  // No kv_len or pos0: each sequence's come from seq_len.
  KvView kv = declare_kv_view(k, s, kc, vc, max_ctx);
  DecodeScalars sc{n_heads, n_kv, max_ctx, {}, {}, scale, window, kv, declare_query_scales(k, s)};
  auto sinks = declare_sinks(k, s);

  auto kvh = k.program_id(1), seq = k.program_id(2);
  auto group = sc.n_heads / sc.n_kv;
  auto g0 = k.program_id(0) * static_cast<int>(BG);
  std::vector<Value> heads;
  WalkInputs in = decode_inputs(s, q, sc, kvh, seq, g0, heads);
  in.kv.table_row = seq.to(DType::i64) * ((sc.max_ctx + (page - 1)) / page).to(DType::i64);
  auto len =
      minimum(maximum(load(seq_len + seq.to(DType::i64)), full({}, 1, DType::i32)), sc.max_ctx);
  WalkState st = walk_start(k, BG, D);
  walk_keys(k, in, window_begin(len - 1, sc.window), len, st);
  decode_finish(in, st, out, sinks, heads, g0, group);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = kName,
    .family = "attention",
    .summary = "one decode step of a batch of sequences, each token over its own pages of a "
               "paged KV cache",
    .dtype_roles = {{"KV", {DType::f16, DType::bf16, DType::f32, DType::i8}}, kActivationRole},
    .constexpr_defaults =
        {{"HEAD_DIM", 128}, {"BLOCK_G", 2}, {"PREFETCH", 0}, {"SINKS", 0}, {"PAGE", 16}},
    .build = build_attention_decode_batch,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          DecodeBatchSizes z = decode_batch_sizes(kName, s, a);
          return LaunchShape{{cdiv(z.group, s.constexpr_("BLOCK_G")), z.n_kv_heads, z.n_seqs},
                             z.buffer_elems()};
        },
    .shape_heuristic = decode_block_g,
    .tunables = {{"BLOCK_G", {1, 2, 4, 8}}},
    .shape_keys = {"n_seqs", "n_heads", "n_kv_heads"},
    // As attention_decode: the same walk per sequence.
    .rtol = 1e-4,
    .atol = 1e-5,
}));

}  // namespace
}  // namespace kiln
