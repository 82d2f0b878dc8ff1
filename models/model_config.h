// A model's hyper-parameters, read from GGUF metadata as llama.cpp names
// them ("<arch>.embedding_length", ...), for the architectures Kiln runs
// (models/arch/).
//
// The forward reads only this struct, never the metadata: what an
// architecture means (NEOX rope, QK-norm, biases, expert routing) comes from
// its description (models/arch/arch.h), and the keys every architecture
// shares are read here, with an error naming the file and key when
// something required is missing or inconsistent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/rope/rope.h"
#include "models/gguf.h"

namespace kiln {

struct ModelConfig {
  std::string arch;  // "llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "gpt-oss"
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int64_t n_ff = 0, n_vocab = 0, n_ctx_train = 0;
  bool tied_embeddings = false;  // no output.weight: the output reuses token_embd
  int64_t rope_dim = 0;          // rotated dims per head
  double rope_base = 10000, rms_eps = 1e-5;
  bool rope_neox = false;   // pairs (i, i + d/2) instead of (2i, 2i+1)
  bool qk_norm = false;     // RMSNorm over each q and k head (qwen3, gemma3)
  bool qkv_bias = false;    // q, k, v projections carry biases (qwen2, gpt-oss)
  bool out_bias = false;    // so does the attention output (gpt-oss)
  bool attn_sinks = false;  // per-head sink logits in the softmax (gpt-oss)
  // q, k and v in one matrix attn_qkv; gate and up in one ffn_up, the
  // gate's rows first (phi3).
  bool fused_qkv = false, fused_gate_up = false;
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;  // MoE; n_expert 0: dense
  bool norm_topk = false;  // renormalise the chosen experts' weights to sum 1
  // The router and every expert matrix carry biases, and the experts'
  // activation is GPT-OSS's clamped SwiGLU (gpt-oss).
  bool expert_bias = false;
  // A pruned model that kept its full router (models/expert_pruning.h): the
  // router scores n_router > n_expert experts, and a chosen one the model
  // no longer holds is dropped (the others renormalised with expert_renorm).
  int64_t n_router = 0;
  bool expert_renorm = false;
  // Then, per layer, the router's experts' ids in the file (-1 pruned):
  // [n_layer][n_router], checked on load; empty otherwise.
  std::vector<int32_t> expert_map;
  // Of q.k in the softmax: 1/sqrt(head_dim), but 1/sqrt(n_embd / n_head) in
  // Gemma 3 27B, as llama.cpp (which tells it by its 62 layers).
  double attn_scale = 0;
  // Sliding-window attention (gemma3): layer l attends to the last
  // `sliding_window` tokens when swa_pattern > 0 and l % swa_pattern <
  // swa_pattern - 1 (every swa_pattern-th layer is global).
  int64_t sliding_window = 0, swa_pattern = 0;
  // How an embedding pools a sequence's final hidden states
  // ({arch}.pooling_type, llama.cpp's numbering): mean when the model names
  // none (a causal LM), the first token's (cls) or the last token's.
  enum class Pooling { mean, cls, last } pooling = Pooling::mean;
  double rope_base_swa = 0;  // rope base of sliding-window layers
  RopeScaling rope_scaling;  // linear or YaRN, of the global layers
  // LongRoPE (phi3): per-pair frequency factors for contexts up to and
  // beyond rope_scaling.orig_ctx; choose_rope_factors picks one for a
  // context, as llama.cpp does.
  std::vector<float> rope_factors_short, rope_factors_long;
  bool swa_rope_scaled = false;  // and of the sliding ones (gpt-oss; not gemma3)

  bool sliding(int64_t layer) const {
    return sliding_window > 0 && swa_pattern > 0 && layer % swa_pattern < swa_pattern - 1;
  }
  double rope_base_for(int64_t layer) const { return sliding(layer) ? rope_base_swa : rope_base; }
  RopeScaling rope_scaling_for(int64_t layer) const {
    return sliding(layer) && !swa_rope_scaled ? RopeScaling{} : rope_scaling;
  }

  static ModelConfig from_gguf(const GgufFile& f);
  // The LongRoPE factors for a context of n_ctx tokens into rope_scaling
  // (the long ones past the original context); nothing without them.
  void choose_rope_factors(int64_t n_ctx);
  bool moe() const { return n_expert > 0; }
};

}  // namespace kiln
