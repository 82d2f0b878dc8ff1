// GPT-OSS: llama's pre-norm block with biased projections, attention
// sinks, even layers windowed and YaRN rope (all from the ModelConfig), and
// a routed MoE whose pre-norm is named post_attention_norm; the experts
// (with biases) run GPT-OSS's clamped SwiGLU and are weighed by the softmax
// of the chosen router logits.
#include "models/arch/arch.h"

namespace kiln {

Tensor build_gpt_oss(Forward& f) {
  Tensor x = f.embed();
  for (int64_t l = 0; l < f.c.n_layer; ++l) {
    x = f.named(f.add(x, f.attention(l, f.norm(x, Forward::blk(l, "attn_norm.weight")))), "ffn_inp",
                l);
    x = f.named(f.add(x, f.moe(l, f.norm(x, Forward::blk(l, "post_attention_norm.weight")))),
                "l_out", l);
  }
  return f.logits(x);
}

}  // namespace kiln
