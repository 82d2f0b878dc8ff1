// Gemma 3: embeddings scaled by sqrt(n_embd); each sub-layer's output is
// normed again before it joins the residual stream; GeGLU (tanh GELU) FFN.
// q/k norms, per-layer rope bases and the attention scale come from the
// ModelConfig. The GGUF converter stores the norms' weights with Gemma's +1
// already added, so they are plain RMSNorms here. Sliding-window layers
// attend to the last ModelConfig::sliding_window positions (Forward::attention).
#include <cmath>

#include "models/arch/arch.h"

namespace kiln {

Tensor build_gemma3(Forward& f) {
  auto blk = Forward::blk;
  Tensor x = f.embed(std::sqrt(static_cast<double>(f.c.n_embd)));
  for (int64_t l = 0; l < f.c.n_layer; ++l) {
    Tensor h = f.attention(l, f.norm(x, blk(l, "attn_norm.weight")));
    x = f.named(f.add(x, f.norm(h, blk(l, "post_attention_norm.weight"))), "sa_out", l);
    h = f.ffn(l, f.norm(x, blk(l, "ffn_norm.weight")), Activation::gelu_tanh);
    x = f.named(f.add(x, f.norm(h, blk(l, "post_ffw_norm.weight"))), "l_out", l);
  }
  return f.logits(x);
}

}  // namespace kiln
