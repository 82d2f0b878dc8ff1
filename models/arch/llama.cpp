// Llama and the architectures that share its block (qwen2, qwen3, qwen3moe):
// x += attn(norm(x)); x += ffn(norm(x)), with SwiGLU or routed experts.
#include "models/arch/arch.h"

namespace kiln {

Tensor build_llama(Forward& f) {
  Tensor x = f.embed();
  for (int64_t l = 0; l < f.c.n_layer; ++l) {
    x = f.named(f.add(x, f.attention(l, f.norm(x, Forward::blk(l, "attn_norm.weight")))), "ffn_inp",
                l);
    Tensor h = f.norm(x, Forward::blk(l, "ffn_norm.weight"));
    x = f.named(f.add(x, f.c.moe() ? f.moe(l, h) : f.ffn(l, h, Activation::silu)), "l_out", l);
  }
  return f.logits(x);
}

}  // namespace kiln
