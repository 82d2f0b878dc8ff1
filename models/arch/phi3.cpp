// Phi-3: llama's pre-norm block (build_llama) with q, k and v in one
// matrix (attn_qkv) and the FFN's gate and up projections in one (ffn_up,
// the gate's rows first), rope on NEOX pairs, and for the 128k models
// LongRoPE: per-pair frequency factors for contexts within the original
// one and beyond (ModelConfig::choose_rope_factors), with cos and sin
// scaled by sqrt(1 + ln(scale) / ln(original context)). Phi-3's sliding
// window is not applied, as llama.cpp does not apply it.
#include "models/arch/arch.h"

namespace kiln {

namespace {

std::vector<ArchTensor> tensors(const ArchDesc&, const ModelConfig& c) {
  const int64_t e = c.n_embd, q = c.n_head * c.head_dim, kv = c.n_head_kv * c.head_dim;
  using R = TensorRole;
  std::vector<ArchTensor> t;
  t.push_back({"token_embd.weight", "embed_tokens.weight", {e, c.n_vocab}, R::token_embd});
  if (!c.rope_factors_long.empty()) {
    const int64_t pairs = c.rope_dim / 2;
    t.push_back(
        {"rope_factors_long.weight", "", {pairs}, R::rope_factors, -1, HfForm::from_config});
    t.push_back(
        {"rope_factors_short.weight", "", {pairs}, R::rope_factors, -1, HfForm::from_config});
  }
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const std::string h = "layers." + std::to_string(l) + ".";
    auto add = [&](const std::string& name, const std::string& hf, std::vector<int64_t> shape,
                   R role) {
      t.push_back({b + name, h + hf, std::move(shape), role, l});
    };
    add("attn_norm.weight", "input_layernorm.weight", {e}, R::norm);
    add("attn_qkv.weight", "self_attn.qkv_proj.weight", {e, q + 2 * kv}, R::attn_qkv);
    add("attn_output.weight", "self_attn.o_proj.weight", {q, e}, R::attn_output);
    add("ffn_norm.weight", "post_attention_layernorm.weight", {e}, R::norm);
    add("ffn_up.weight", "mlp.gate_up_proj.weight", {e, 2 * c.n_ff}, R::ffn_up);
    add("ffn_down.weight", "mlp.down_proj.weight", {c.n_ff, e}, R::ffn_down);
  }
  t.push_back({"output_norm.weight", "norm.weight", {e}, R::norm});
  if (!c.tied_embeddings)
    t.push_back({"output.weight", "lm_head.weight", {e, c.n_vocab}, R::output});
  return t;
}

// Heads of n_embd / n_head (llama.cpp's phi3 requires it), rope base 10000.
ModelPreset phi3(std::string preset, std::string name, int64_t n_vocab, int64_t n_ctx,
                 int64_t n_embd, int64_t n_layer, int64_t n_head, int64_t n_head_kv, int64_t n_ff,
                 int64_t longrope_orig_ctx = 0) {
  ModelPreset p =
      make_preset("phi3", std::move(preset), "phi3", std::move(name), n_vocab, n_ctx, n_embd,
                  n_layer, n_head, n_head_kv, n_embd / n_head, n_ff, 1e4f, 1e-5f);
  p.longrope_orig_ctx = longrope_orig_ctx;
  return p;
}

std::vector<ModelPreset> presets() {
  // `tiny` and `tiny-longrope` (LongRoPE past an original context of 64
  // tokens, so any prompt over 64 tokens, and any context, uses the long
  // factors); `mini` has Phi-3-mini-4k's shapes, `mini-128k` Phi-3-mini-128k's
  // (pass --layers to write fewer of them), `medium` Phi-3-medium's GQA.
  return {phi3("tiny", "kiln phi3 tiny", 0, 4096, 256, 2, 4, 2, 512),
          phi3("tiny-longrope", "kiln phi3 tiny-longrope", 0, 4096, 256, 2, 4, 2, 512, 64),
          phi3("mini", "kiln phi3 mini", 32064, 4096, 3072, 32, 32, 32, 8192),
          phi3("mini-128k", "kiln phi3 mini-128k", 32064, 131072, 3072, 32, 32, 32, 8192, 4096),
          phi3("medium", "kiln phi3 medium", 32064, 4096, 5120, 40, 40, 10, 17920)};
}

}  // namespace

const ArchDesc& phi3_arch() {
  static const ArchDesc a = [] {
    ArchDesc d;
    d.name = "phi3";
    d.hf_model_types = {"phi3"};
    d.fused_qkv = true;
    d.fused_gate_up = true;
    d.hf_longrope = true;
    d.vocab_specials = {"<unk>", "<s>", "</s>", "<|endoftext|>"};
    d.build = build_llama;
    d.tensors = tensors;
    d.presets = presets;
    return d;
  }();
  return a;
}

}  // namespace kiln
