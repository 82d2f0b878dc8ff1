// Hyper-parameters of real architectures at named sizes, for the random-weight
// models `kiln gen-model` writes.
//
// Kiln is tested and benchmarked on model files that llama.cpp loads too, so
// a preset is a point in the space of real models (TinyLlama-1.1B's shapes,
// a Qwen3-0.6B-like block with explicit 128-wide heads, a Mixtral-style MoE,
// Gemma 3 1B's)
// described with llama.cpp's GGUF vocabulary: `arch` is
// general.architecture and every field maps to one "<arch>.*" key. The CLI
// name "llama-moe" is arch llama with experts, as Mixtral's files are. Each
// architecture's presets live with its description (models/arch/); what a
// preset's tensors are (biases, norms) is the architecture's, not the
// preset's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

struct ModelPreset {
  std::string
      family;  // the CLI's --arch: llama, qwen2, qwen3, qwen3moe, llama-moe, gemma3, gpt-oss
  std::string preset;   // the CLI's --preset: tiny, small, tinyllama-1.1b, ...
  std::string arch;     // general.architecture: llama, qwen2, qwen3, qwen3moe, gemma3, gpt-oss
  std::string name;     // general.name
  int64_t n_vocab = 0;  // 0: the tokenizer's size; else the byte-level vocabulary is padded to it
  int64_t n_ctx = 0;    // context_length
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;            // per head, for q, k and v
  bool explicit_head_dim = false;  // written as attention.key_length / value_length
  int64_t n_ff = 0;                // feed_forward_length (llama-moe: each expert's)
  int64_t n_expert = 0;            // 0: dense
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;  // expert_feed_forward_length (qwen3moe); 0: not written
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;  // no output.weight: the output reuses token_embd
  int64_t sliding_window = 0;    // gemma3, gpt-oss: attention.sliding_window; 0: not written
  float yarn_factor = 0;         // rope.scaling.type yarn with this factor; 0: none
  int64_t yarn_orig_ctx = 0;     // rope.scaling.original_context_length
  // LongRoPE (phi3): rope_factors_long/short and this original context
  // (rope.scaling.original_context_length); 0: none.
  int64_t longrope_orig_ctx = 0;

  bool moe() const { return n_expert > 0; }
  // Each expert's FFN width (llama.cpp: n_ff_exp, else n_ff).
  int64_t expert_ff() const { return n_ff_exp ? n_ff_exp : n_ff; }
};

// A dense preset of these shapes; with_experts makes it an MoE.
ModelPreset make_preset(std::string family, std::string preset, std::string arch, std::string name,
                        int64_t n_vocab, int64_t n_ctx, int64_t n_embd, int64_t n_layer,
                        int64_t n_head, int64_t n_head_kv, int64_t head_dim, int64_t n_ff,
                        float rope_base, float rms_eps);
ModelPreset with_experts(ModelPreset p, int64_t n_expert, int64_t n_used, int64_t n_ff_exp);

// The preset, or a kiln::Error naming the family or preset and listing the known ones.
ModelPreset find_model_preset(std::string_view family, std::string_view preset);
// Every preset, in a stable order.
const std::vector<ModelPreset>& model_presets();

}  // namespace kiln
