// Causal GQA attention for prompt processing of one sequence: out =
// softmax(q K^T * scale + causal mask) V per query head, a program per
// BLOCK_M consecutive query tokens and query head (prefill_rows.h).
#include "ir/builder.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/attention_sinks.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/attention/prefill_rows.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_attention_prefill(const Spec& s) {
  KernelBuilder k("attention_prefill", s);
  check_prefill_constexprs("attention_prefill", s);
  PrefillInputs in = declare_prefill_params(k, s, query_dtype(s));
  in.q8 = declare_query_scales(k, s);
  in.sink = sink_logit(declare_sinks(k, s), in.head);
  prefill_rows(k, s, in);
  return k.finish();
}
KILN_REGISTER_KERNEL((KernelDef{
    .name = "attention_prefill",
    .family = "attention",
    .summary = "causal GQA flash attention of a block of query tokens over a KV cache",
    .dtype_roles = {{"KV", {DType::f16, DType::bf16, DType::f32, DType::i8, DType::u32}},
                    kActivationRole},
    .constexpr_defaults =
        {{"HEAD_DIM", 128}, {"BLOCK_M", 4}, {"SINKS", 0}, {"PAGE", 0}, {"KBITS", 4}, {"VBITS", 4}},
    .build = build_attention_prefill,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          return prefill_launch_shape("attention_prefill", s, a);
        },
    .shape_heuristic = prefill_block_m,
    .tunables = {{"BLOCK_M", {1, 2, 4, 8}}},
    .shape_keys = {"n_tokens", "kv_len", "n_heads"},
    // f32 dot products over HEAD_DIM, the vector exp2 (~2.5e-7 relative) and
    // f32 sums over kv_len, reassociated against the interpreter by FMA
    // contraction and the block sizes.
    .rtol = 1e-4,
    .atol = 1e-5,
}));

}  // namespace
}  // namespace kiln
