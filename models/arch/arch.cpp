#include "models/arch/arch.h"

#include "ir/error.h"

namespace kiln {

const std::vector<const ArchDesc*>& arch_descs() {
  static const std::vector<const ArchDesc*> all = {
      &llama_arch(),  &qwen2_arch(),   &qwen3_arch(), &qwen3moe_arch(),
      &gemma3_arch(), &gpt_oss_arch(), &phi3_arch()};
  return all;
}

const ArchDesc& arch_desc(std::string_view name) {
  std::string names;
  for (const ArchDesc* a : arch_descs()) {
    if (a->name == name) return *a;
    names += (names.empty() ? "" : ", ") + a->name;
  }
  throw Error("architecture '" + std::string(name) + "' is not supported (" + names + ")");
}

const ArchDesc* arch_for_hf_model_type(std::string_view model_type) {
  for (const ArchDesc* a : arch_descs())
    for (const std::string& t : a->hf_model_types)
      if (t == model_type) return a;
  return nullptr;
}

void apply_arch_features(const ArchDesc& a, ModelConfig& c) {
  c.rope_neox = a.rope_neox;
  c.qk_norm = a.qk_norm;
  c.qkv_bias = a.qkv_bias;
  c.out_bias = a.out_bias;
  c.attn_sinks = a.attn_sinks;
  c.expert_bias = a.expert_bias;
  c.norm_topk = a.norm_topk;
  c.fused_qkv = a.fused_qkv;
  c.fused_gate_up = a.fused_gate_up;
}

ModelConfig preset_config(const ModelPreset& p, int64_t n_vocab) {
  ModelConfig c;
  c.arch = p.arch;
  apply_arch_features(arch_desc(p.arch), c);
  c.n_embd = p.n_embd;
  c.n_layer = p.n_layer;
  c.n_head = p.n_head;
  c.n_head_kv = p.n_head_kv;
  c.head_dim = c.rope_dim = p.head_dim;
  c.n_ff = p.n_ff;
  if (p.longrope_orig_ctx > 0) {
    c.rope_factors_long.assign(static_cast<size_t>(p.head_dim / 2), 1.0f);
    c.rope_factors_short = c.rope_factors_long;
    c.rope_scaling.orig_ctx = static_cast<double>(p.longrope_orig_ctx);
  }
  c.n_vocab = n_vocab;
  c.n_ctx_train = p.n_ctx;
  c.n_expert = p.n_expert;
  c.n_expert_used = p.n_expert_used;
  c.n_ff_exp = p.expert_ff();
  c.n_router = p.n_expert;
  c.tied_embeddings = p.tied_embeddings;
  return c;
}

std::vector<ArchTensor> ArchDesc::decoder_tensors(const ArchDesc& a, const ModelConfig& c) {
  const int64_t e = c.n_embd, q = c.n_head * c.head_dim, kv = c.n_head_kv * c.head_dim;
  std::vector<ArchTensor> t;
  using R = TensorRole;
  t.push_back({"token_embd.weight", "embed_tokens.weight", {e, c.n_vocab}, R::token_embd});
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const std::string h = "layers." + std::to_string(l) + ".";
    auto add = [&](const std::string& name, const std::string& hf, std::vector<int64_t> shape,
                   R role, HfForm form = HfForm::plain) {
      t.push_back({b + name, h + hf, std::move(shape), role, l, form});
    };
    add("attn_norm.weight", "input_layernorm.weight", {e}, R::norm);
    add("attn_q.weight", "self_attn.q_proj.weight", {e, q}, R::attn_q);
    if (a.qkv_bias) add("attn_q.bias", "self_attn.q_proj.bias", {q}, R::bias);
    add("attn_k.weight", "self_attn.k_proj.weight", {e, kv}, R::attn_k);
    if (a.qkv_bias) add("attn_k.bias", "self_attn.k_proj.bias", {kv}, R::bias);
    add("attn_v.weight", "self_attn.v_proj.weight", {e, kv}, R::attn_v);
    if (a.qkv_bias) add("attn_v.bias", "self_attn.v_proj.bias", {kv}, R::bias);
    add("attn_output.weight", "self_attn.o_proj.weight", {q, e}, R::attn_output);
    if (a.out_bias) add("attn_output.bias", "self_attn.o_proj.bias", {e}, R::bias);
    if (a.attn_sinks) add("attn_sinks.weight", "self_attn.sinks", {c.n_head}, R::bias);
    if (a.qk_norm) {
      add("attn_q_norm.weight", "self_attn.q_norm.weight", {c.head_dim}, R::norm);
      add("attn_k_norm.weight", "self_attn.k_norm.weight", {c.head_dim}, R::norm);
    }
    if (a.post_norms || a.ffn_norm_named_post_attention)
      add("post_attention_norm.weight", "post_attention_layernorm.weight", {e}, R::norm);
    if (a.post_norms)
      add("ffn_norm.weight", "pre_feedforward_layernorm.weight", {e}, R::norm);
    else if (!a.ffn_norm_named_post_attention)
      add("ffn_norm.weight", "post_attention_layernorm.weight", {e}, R::norm);
    if (c.moe()) {
      // A pruned model that kept its full router routes n_router experts.
      const int64_t f = c.n_ff_exp, x = c.n_expert, r = c.n_router > 0 ? c.n_router : x;
      if (a.expert_bias) {
        add("ffn_gate_inp.weight", "mlp.router.weight", {e, r}, R::router, HfForm::gpt_oss_moe);
        add("ffn_gate_inp.bias", "", {r}, R::bias, HfForm::with_router);
        add("ffn_gate_exps.weight", "", {e, f, x}, R::ffn_gate, HfForm::with_router);
        add("ffn_up_exps.weight", "", {e, f, x}, R::ffn_up, HfForm::with_router);
        add("ffn_down_exps.weight", "", {f, e, x}, R::ffn_down, HfForm::with_router);
        add("ffn_gate_exps.bias", "", {f, x}, R::bias, HfForm::with_router);
        add("ffn_up_exps.bias", "", {f, x}, R::bias, HfForm::with_router);
        add("ffn_down_exps.bias", "", {e, x}, R::bias, HfForm::with_router);
      } else {
        add("ffn_gate_inp.weight", a.hf_router, {e, r}, R::router);
        add("ffn_gate_exps.weight", a.hf_experts.at(0), {e, f, x}, R::ffn_gate, HfForm::experts);
        add("ffn_up_exps.weight", a.hf_experts.at(1), {e, f, x}, R::ffn_up, HfForm::experts);
        add("ffn_down_exps.weight", a.hf_experts.at(2), {f, e, x}, R::ffn_down, HfForm::experts);
      }
    } else {
      add("ffn_gate.weight", "mlp.gate_proj.weight", {e, c.n_ff}, R::ffn_gate);
      add("ffn_up.weight", "mlp.up_proj.weight", {e, c.n_ff}, R::ffn_up);
      add("ffn_down.weight", "mlp.down_proj.weight", {c.n_ff, e}, R::ffn_down);
    }
    if (a.post_norms)
      add("post_ffw_norm.weight", "post_feedforward_layernorm.weight", {e}, R::norm);
  }
  t.push_back({"output_norm.weight", "norm.weight", {e}, R::norm});
  if (!c.tied_embeddings)
    t.push_back({"output.weight", "lm_head.weight", {e, c.n_vocab}, R::output});
  return t;
}

}  // namespace kiln
