#include "models/model_presets.h"

#include <algorithm>

#include "ir/error.h"

namespace kiln {

namespace {

ModelPreset dense(std::string family, std::string preset, std::string arch, std::string name,
                  int64_t n_vocab, int64_t n_ctx, int64_t n_embd, int64_t n_layer, int64_t n_head,
                  int64_t n_head_kv, int64_t head_dim, int64_t n_ff, float rope_base,
                  float rms_eps) {
  ModelPreset p;
  p.family = std::move(family);
  p.preset = std::move(preset);
  p.arch = std::move(arch);
  p.name = std::move(name);
  p.n_vocab = n_vocab;
  p.n_ctx = n_ctx;
  p.n_embd = n_embd;
  p.n_layer = n_layer;
  p.n_head = n_head;
  p.n_head_kv = n_head_kv;
  p.head_dim = head_dim;
  p.n_ff = n_ff;
  p.rope_base = rope_base;
  p.rms_eps = rms_eps;
  return p;
}

ModelPreset qwen2(std::string preset, std::string name, int64_t n_vocab, int64_t n_embd,
                  int64_t n_layer, int64_t n_head, int64_t n_head_kv, int64_t n_ff) {
  ModelPreset p = dense("qwen2", std::move(preset), "qwen2", std::move(name), n_vocab, 32768,
                        n_embd, n_layer, n_head, n_head_kv, n_embd / n_head, n_ff, 1e6f, 1e-6f);
  p.qkv_bias = true;
  return p;
}

// Qwen3 configs always state head_dim; the converter writes it as key_length.
ModelPreset qwen3(std::string family, std::string preset, std::string name, int64_t n_vocab,
                  int64_t n_embd, int64_t n_layer, int64_t n_head, int64_t n_head_kv,
                  int64_t head_dim, int64_t n_ff) {
  ModelPreset p = dense(std::move(family), std::move(preset), "", std::move(name), n_vocab, 40960,
                        n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, 1e6f, 1e-6f);
  p.arch = p.family;
  p.explicit_head_dim = true;
  p.qk_norm = true;
  return p;
}

// Gemma 3: q/k norms, pre- and post-norms, a tied output, every 6th layer
// global and the others windowed (the window written as llama.cpp's
// converter does), heads of head_dim whatever n_embd / n_head is.
ModelPreset gemma3(std::string preset, std::string name, int64_t n_vocab, int64_t n_ctx,
                   int64_t n_embd, int64_t n_layer, int64_t n_head, int64_t n_head_kv,
                   int64_t head_dim, int64_t n_ff, int64_t window) {
  ModelPreset p = dense("gemma3", std::move(preset), "gemma3", std::move(name), n_vocab, n_ctx,
                        n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, 1e6f, 1e-6f);
  p.explicit_head_dim = true;
  p.qk_norm = true;
  p.post_norms = true;
  p.tied_embeddings = true;
  p.sliding_window = window;
  return p;
}

ModelPreset with_experts(ModelPreset p, int64_t n_expert, int64_t n_used, int64_t n_ff_exp) {
  p.n_expert = n_expert;
  p.n_expert_used = n_used;
  p.n_ff_exp = n_ff_exp;
  return p;
}

// GPT-OSS: biased attention with sinks, even layers windowed, YaRN rope,
// experts with biases; no tied output.
ModelPreset gpt_oss(std::string preset, std::string name, int64_t n_vocab, int64_t n_embd,
                    int64_t n_layer, int64_t n_head, int64_t n_head_kv, int64_t n_expert,
                    int64_t n_used, int64_t n_ff_exp, int64_t window) {
  ModelPreset p = dense("gpt-oss", std::move(preset), "gpt-oss", std::move(name), n_vocab, 131072,
                        n_embd, n_layer, n_head, n_head_kv, 64, n_ff_exp, 150000.0f, 1e-5f);
  p.explicit_head_dim = true;
  p.qkv_bias = true;
  p.gpt_oss_layout = true;
  p.tokenizer_pre = "gpt-4o";
  p.sliding_window = window;
  p.yarn_factor = 32;
  p.yarn_orig_ctx = 4096;
  return with_experts(p, n_expert, n_used, n_ff_exp);
}

std::vector<ModelPreset> build() {
  std::vector<ModelPreset> v;
  // llama: a toy block, and TinyLlama-1.1B's exact shapes.
  v.push_back(dense("llama", "tiny", "llama", "kiln llama tiny", 0, 2048, 256, 2, 4, 2, 64, 768,
                    1e4f, 1e-5f));
  v.push_back(dense("llama", "tinyllama-1.1b", "llama", "kiln tinyllama-1.1b", 32000, 2048, 2048,
                    22, 32, 4, 64, 5632, 1e4f, 1e-5f));
  // SmolLM-135M's widths with 4 of its 30 layers: rows of 576 are not whole
  // K-quant blocks, so llama.cpp's K mixes fall back to Q5_0 / Q8_0 there,
  // as they do in the small models people download.
  v.push_back(dense("llama", "smollm", "llama", "kiln smollm", 49152, 2048, 576, 4, 9, 3, 64, 1536,
                    1e4f, 1e-5f));
  // qwen2: q/k/v biases; `small` has Qwen2.5-0.5B's widths (896 is not a
  // multiple of 256, so K-quants fall back as llama.cpp's do).
  v.push_back(qwen2("tiny", "kiln qwen2 tiny", 0, 256, 2, 4, 2, 768));
  v.push_back(qwen2("small", "kiln qwen2 small", 151936, 896, 4, 14, 2, 4864));
  // qwen3: QK-norm, heads of 128 wider than n_embd / n_head; `small` has
  // Qwen3-0.6B's widths with 4 layers.
  v.push_back(qwen3("qwen3", "tiny", "kiln qwen3 tiny", 0, 256, 2, 4, 2, 128, 768));
  v.push_back(qwen3("qwen3", "small", "kiln qwen3 small", 151936, 1024, 4, 16, 8, 128, 3072));
  // qwen3moe: 8 experts, 2 used, each expert_feed_forward_length wide. As
  // in Qwen3-30B-A3B, the attention output (n_head * 128) is wider than both
  // n_embd and an expert's FFN.
  v.push_back(with_experts(
      qwen3("qwen3moe", "tiny", "kiln qwen3moe tiny", 0, 256, 2, 4, 2, 128, 768), 8, 2, 128));
  v.push_back(with_experts(
      qwen3("qwen3moe", "small", "kiln qwen3moe small", 151936, 1024, 4, 16, 4, 128, 3072), 8, 2,
      768));
  // Qwen3-30B-A3B's shapes: 48 layers of 128 experts, 8 used, 768 wide
  // (pass --layers to write fewer of them).
  v.push_back(with_experts(
      qwen3("qwen3moe", "30b-a3b", "kiln qwen3moe 30b-a3b", 151936, 2048, 48, 32, 4, 128, 6144),
      128, 8, 768));
  // llama-moe: Mixtral's layout (arch llama, feed_forward_length per expert).
  v.push_back(with_experts(dense("llama-moe", "tiny", "llama", "kiln llama-moe tiny", 0, 2048, 256,
                                 2, 4, 2, 64, 512, 1e4f, 1e-5f),
                           8, 2, 0));
  v.push_back(with_experts(dense("llama-moe", "small", "llama", "kiln llama-moe small", 32000,
                                 32768, 1024, 4, 16, 4, 64, 3584, 1e6f, 1e-5f),
                           8, 2, 0));
  // gpt-oss: `tiny` has a windowed and a global layer; `20b` has
  // GPT-OSS-20B's shapes (pass --layers to write fewer of them).
  v.push_back(gpt_oss("tiny", "kiln gpt-oss tiny", 0, 256, 2, 4, 2, 8, 4, 256, 32));
  v.push_back(gpt_oss("20b", "kiln gpt-oss 20b", 201088, 2880, 24, 64, 8, 32, 4, 2880, 128));
  // gemma3: `tiny` has 6 layers, so both windowed and global ones, and
  // n_head * head_dim wider than n_embd; `1b` is Gemma 3 1B's shapes.
  v.push_back(gemma3("tiny", "kiln gemma3 tiny", 0, 2048, 256, 6, 4, 2, 128, 768, 512));
  v.push_back(gemma3("1b", "kiln gemma3 1b", 262144, 32768, 1152, 26, 4, 1, 256, 6912, 512));
  return v;
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = build();
  return presets;
}

ModelPreset find_model_preset(std::string_view family, std::string_view preset) {
  std::vector<std::string> families, names;
  for (const ModelPreset& p : model_presets()) {
    if (std::find(families.begin(), families.end(), p.family) == families.end())
      families.push_back(p.family);
    if (p.family != family) continue;
    if (p.preset == preset) return p;
    names.push_back(p.preset);
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
  };
  if (names.empty())
    throw Error("unknown model architecture '" + std::string(family) +
                "' (known: " + join(families) + ")");
  throw Error("unknown preset '" + std::string(preset) + "' for architecture '" +
              std::string(family) + "' (known: " + join(names) + ")");
}

}  // namespace kiln
