// Prefill attention of a packed batch of sequences (varlen): q and out hold
// every sequence's new tokens back to back, sequence s's rows
// cu_seqlens[s] .. cu_seqlens[s+1] - 1 at positions seq_pos0[s] .. (a chunk
// after a cached prefix, or a whole prompt from 0), attending causally to
// its own cache only: a block-diagonal causal mask whose off-diagonal
// blocks are never visited, not masked.
//
// The cache is a paged pool (PAGE > 0, kv_cache.h) with one block-table
// row per sequence: block_table [n_seqs][ceil(max_ctx / PAGE)], sequence s
// holding seq_pos0[s] + its token count rows (its new keys stored first).
// A program per (BLOCK_M tokens, query head, sequence) runs prefill_rows.h;
// the grid covers max_seq_tokens per sequence and a program past its
// sequence's tokens does nothing. The host checks the batch
// (check_varlen_batch, attention_shape.h); the kernel clamps a sequence's
// rows to max_ctx so a bad batch cannot read past its table row.
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/attention_sinks.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/attention/prefill_rows.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

const char* const kName = "attention_prefill_varlen";

Kernel build_attention_prefill_varlen(const Spec& s) {
  KernelBuilder k(kName, s);
  check_prefill_constexprs(kName, s);
  if (s.constexpr_("PAGE") <= 0)
    throw Error(std::string("kernel '") + kName + "' reads a paged cache: PAGE must be > 0");
  DType KV = s.dtype("KV");
  auto q = k.buffer("q", query_dtype(s)), kc = k.buffer("k", KV), vc = k.buffer("v", KV),
       out = k.buffer("out", s.dtype("T"));
  auto cu = k.buffer("cu_seqlens", DType::i32), seq_pos0 = k.buffer("seq_pos0", DType::i32);
  k.scalar("n_tokens", DType::i32);
  auto n_heads = k.scalar("n_heads", DType::i32), n_kv = k.scalar("n_kv_heads", DType::i32);
  auto max_ctx = k.scalar("max_ctx", DType::i32);
  k.scalar("n_seqs", DType::i32);
  k.scalar("max_seq_tokens", DType::i32);
  auto scale = k.scalar("scale", DType::f32);
  auto window = k.scalar("window", DType::i32);
  KvView kv = declare_kv_view(k, s, kc, vc, max_ctx);
  QueryScales q8 = declare_query_scales(k, s);
  auto sinks = declare_sinks(k, s);

  auto h = k.program_id(1), seq = k.program_id(2);
  auto t0 = k.program_id(0) * static_cast<int>(s.constexpr_("BLOCK_M"));
  auto row0 = load(cu + seq.to(DType::i64));
  auto n = load(cu + (seq + 1).to(DType::i64)) - row0;
  auto pos0 = load(seq_pos0 + seq.to(DType::i64));
  const int page = static_cast<int>(s.constexpr_("PAGE"));
  kv.kvh = h / (n_heads / n_kv);
  kv.table_row = seq.to(DType::i64) * ((max_ctx + (page - 1)) / page).to(DType::i64);
  k.if_(t0 < n, [&] {
    prefill_rows(k, s,
                 {q, q8, out, kv, row0, n, pos0, minimum(pos0 + n, max_ctx), window, h, n_heads, t0,
                  scale, sink_logit(sinks, h)});
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = kName,
    .family = "attention",
    .summary = "causal GQA flash attention of a packed batch of sequences (cu_seqlens), each "
               "over its pages of a paged KV cache",
    .dtype_roles = {{"KV", {DType::f16, DType::bf16, DType::f32, DType::i8}}, kActivationRole},
    .constexpr_defaults = {{"HEAD_DIM", 128}, {"BLOCK_M", 4}, {"SINKS", 0}, {"PAGE", 16}},
    .build = build_attention_prefill_varlen,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          VarlenSizes z = varlen_sizes(kName, s, a);
          return LaunchShape{{cdiv(z.max_seq_tokens, s.constexpr_("BLOCK_M")), z.n_heads, z.n_seqs},
                             z.buffer_elems()};
        },
    .shape_heuristic = prefill_block_m,
    .tunables = {{"BLOCK_M", {1, 2, 4, 8}}},
    .shape_keys = {"n_tokens", "n_seqs", "n_heads"},
    // As attention_prefill: the same program per sequence.
    .rtol = 1e-4,
    .atol = 1e-5,
}));

}  // namespace
}  // namespace kiln
