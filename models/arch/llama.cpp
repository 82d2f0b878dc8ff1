// Llama, and Mixtral (arch llama with experts): pre-norm blocks
// x += attn(norm(x)); x += ffn(norm(x)), SwiGLU or routed experts whose
// chosen weights are renormalised; rope on interleaved pairs (HF's q/k
// rows are permuted into that order). qwen2 and qwen3 share the block.
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

namespace {

std::vector<ModelPreset> presets() {
  std::vector<ModelPreset> v;
  // A toy block, and TinyLlama-1.1B's exact shapes.
  v.push_back(make_preset("llama", "tiny", "llama", "kiln llama tiny", 0, 2048, 256, 2, 4, 2, 64,
                          768, 1e4f, 1e-5f));
  v.push_back(make_preset("llama", "tinyllama-1.1b", "llama", "kiln tinyllama-1.1b", 32000, 2048,
                          2048, 22, 32, 4, 64, 5632, 1e4f, 1e-5f));
  // SmolLM-135M's widths with 4 of its 30 layers: rows of 576 are not whole
  // K-quant blocks, so llama.cpp's K mixes fall back to Q5_0 / Q8_0 there,
  // as they do in the small models people download.
  v.push_back(make_preset("llama", "smollm", "llama", "kiln smollm", 49152, 2048, 576, 4, 9, 3, 64,
                          1536, 1e4f, 1e-5f));
  // llama-moe: Mixtral's layout (arch llama, feed_forward_length per expert).
  v.push_back(with_experts(make_preset("llama-moe", "tiny", "llama", "kiln llama-moe tiny", 0, 2048,
                                       256, 2, 4, 2, 64, 512, 1e4f, 1e-5f),
                           8, 2, 0));
  v.push_back(with_experts(make_preset("llama-moe", "small", "llama", "kiln llama-moe small", 32000,
                                       32768, 1024, 4, 16, 4, 64, 3584, 1e6f, 1e-5f),
                           8, 2, 0));
  return v;
}

// A dense FFN of intermediate_size, or Mixtral's experts, each as wide.
void read_hf(HfConfig& hf) {
  hf.n_ff = hf.get_int("intermediate_size");
  hf.set_u32("feed_forward_length", hf.n_ff);
  if (!hf.optional_int("num_local_experts")) return;
  hf.n_expert = hf.get_int("num_local_experts");
  const int64_t used = hf.get_int("num_experts_per_tok");
  if (used <= 0 || used > hf.n_expert)
    hf.fail(std::to_string(used) + " experts per token of " + std::to_string(hf.n_expert));
  hf.set_u32("expert_count", hf.n_expert);
  hf.set_u32("expert_used_count", used);
}

}  // namespace

const ArchDesc& llama_arch() {
  static const ArchDesc a = [] {
    ArchDesc d;
    d.name = "llama";
    d.hf_model_types = {"llama", "mistral", "mixtral"};
    d.hf_router = "block_sparse_moe.gate.weight";
    d.hf_experts = {"block_sparse_moe.experts.{}.w1", "block_sparse_moe.experts.{}.w3",
                    "block_sparse_moe.experts.{}.w2"};
    d.read_hf = read_hf;
    d.rope_neox = false;
    d.norm_topk = true;
    d.build = build_llama;
    d.presets = presets;
    return d;
  }();
  return a;
}

}  // namespace kiln
