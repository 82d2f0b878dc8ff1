// Qwen2: llama's block (build_llama) with biased q/k/v projections and
// rope on NEOX pairs.
#include "models/arch/arch.h"

namespace kiln {

namespace {

ModelPreset qwen2(std::string preset, std::string name, int64_t n_vocab, int64_t n_embd,
                  int64_t n_layer, int64_t n_head, int64_t n_head_kv, int64_t n_ff) {
  return make_preset("qwen2", std::move(preset), "qwen2", std::move(name), n_vocab, 32768, n_embd,
                     n_layer, n_head, n_head_kv, n_embd / n_head, n_ff, 1e6f, 1e-6f);
}

std::vector<ModelPreset> presets() {
  // `small` has Qwen2.5-0.5B's widths (896 is not a multiple of 256, so
  // K-quants fall back as llama.cpp's do).
  return {qwen2("tiny", "kiln qwen2 tiny", 0, 256, 2, 4, 2, 768),
          qwen2("small", "kiln qwen2 small", 151936, 896, 4, 14, 2, 4864)};
}

}  // namespace

const ArchDesc& qwen2_arch() {
  static const ArchDesc a = [] {
    ArchDesc d;
    d.name = "qwen2";
    d.hf_model_types = {"qwen2"};
    d.qkv_bias = true;
    d.build = build_llama;
    d.presets = presets;
    return d;
  }();
  return a;
}

}  // namespace kiln
