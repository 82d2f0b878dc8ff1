// GPT-OSS: llama's pre-norm block with biased projections and attention
// sinks, even layers windowed, YaRN rope on every layer, and a routed MoE
// whose pre-norm is named post_attention_norm; the experts (with biases)
// run GPT-OSS's clamped SwiGLU and are weighed by the softmax of the
// chosen router logits.
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

namespace {

// No tied output; heads of 64.
ModelPreset gpt_oss(std::string preset, std::string name, int64_t n_vocab, int64_t n_embd,
                    int64_t n_layer, int64_t n_head, int64_t n_head_kv, int64_t n_expert,
                    int64_t n_used, int64_t n_ff_exp, int64_t window) {
  ModelPreset p =
      make_preset("gpt-oss", std::move(preset), "gpt-oss", std::move(name), n_vocab, 131072, n_embd,
                  n_layer, n_head, n_head_kv, 64, n_ff_exp, 150000.0f, 1e-5f);
  p.explicit_head_dim = true;
  p.sliding_window = window;
  p.yarn_factor = 32;
  p.yarn_orig_ctx = 4096;
  return with_experts(p, n_expert, n_used, n_ff_exp);
}

std::vector<ModelPreset> presets() {
  // `tiny` has a windowed and a global layer; `20b` has GPT-OSS-20B's
  // shapes (pass --layers to write fewer of them).
  return {gpt_oss("tiny", "kiln gpt-oss tiny", 0, 256, 2, 4, 2, 8, 4, 256, 32),
          gpt_oss("20b", "kiln gpt-oss 20b", 201088, 2880, 24, 64, 8, 32, 4, 2880, 128)};
}

// As llama.cpp: even layers windowed, the same rope (YaRN) everywhere.
void read_gguf(ModelConfig& c, const GgufFile& f) {
  c.sliding_window = static_cast<int64_t>(f.get_u64(c.arch + ".attention.sliding_window"));
  c.swa_pattern = 2;
  c.rope_base_swa = c.rope_base;
  c.swa_rope_scaled = true;
}

// GPT-OSS as llama.cpp runs it, so a config that says otherwise is
// refused: even layers windowed, YaRN rope on every layer, the clamped
// SwiGLU at limit 7, experts as wide as intermediate_size. (transformers'
// YaRN with `truncate: false` keeps the correction range unrounded;
// ggml rounds it, and Kiln runs ggml's.)
void read_hf(HfConfig& hf) {
  hf.n_expert = hf.get_int("num_local_experts");
  hf.n_ff = hf.get_int("intermediate_size");
  const int64_t used = hf.optional_int("num_experts_per_tok") ? hf.get_int("num_experts_per_tok")
                                                              : hf.get_int("experts_per_token");
  if (used <= 0 || used > hf.n_expert)
    hf.fail(std::to_string(used) + " experts per token of " + std::to_string(hf.n_expert));
  hf.set_u32("feed_forward_length", hf.n_ff);
  hf.set_u32("expert_count", hf.n_expert);
  hf.set_u32("expert_used_count", used);
  hf.set_u32("expert_feed_forward_length", hf.n_ff);
  hf.set_u32("attention.sliding_window", hf.get_int("sliding_window"));
  const std::vector<std::string> types = hf.get_strings("layer_types");
  for (size_t l = 0; l < types.size(); ++l)
    if (types[l] != (l % 2 ? "full_attention" : "sliding_attention"))
      hf.fail("layer_types: layer " + std::to_string(l) + " is \"" + types[l] +
              "\"; Kiln runs GPT-OSS with the even layers windowed and the odd ones full");
  if (hf.get_float("swiglu_limit", 7.0) != 7.0)
    hf.fail("swiglu_limit " + std::to_string(hf.get_float("swiglu_limit", 7.0)) +
            " is not the 7 GPT-OSS's SwiGLU is clamped at");
  std::string rope = hf.get_nested_string("rope_scaling", "rope_type");
  if (rope.empty()) rope = hf.get_nested_string("rope_scaling", "type");
  if (rope != "yarn") hf.fail("GPT-OSS needs rope_scaling of type yarn");
}

}  // namespace

const ArchDesc& gpt_oss_arch() {
  static const ArchDesc a = [] {
    ArchDesc d;
    d.name = "gpt-oss";
    d.hf_model_types = {"gpt_oss"};
    d.qkv_bias = d.out_bias = d.attn_sinks = d.expert_bias = true;
    d.norm_topk = true;  // the softmax of the chosen logits: the same quotient
    d.ffn_norm_named_post_attention = true;
    d.hf_mxfp4_experts = true;
    d.tokenizer_pre = "gpt-4o";  // as its real files say
    d.build = build_gpt_oss;
    d.read_gguf = read_gguf;
    d.read_hf = read_hf;
    d.presets = presets;
    return d;
  }();
  return a;
}

}  // namespace kiln
