// Qwen3 and Qwen3-MoE: llama's block (build_llama) with an RMSNorm over
// each q and k head, heads of an explicit head_dim (128, wider than
// n_embd / n_head), rope on NEOX pairs; the MoE routes every layer
// through experts as wide as moe_intermediate_size and renormalises the
// chosen ones' weights.
#include "models/arch/arch.h"

namespace kiln {

namespace {

// Qwen3 configs always state head_dim; the converter writes it as key_length.
ModelPreset qwen3(std::string family, std::string preset, std::string name, int64_t n_vocab,
                  int64_t n_embd, int64_t n_layer, int64_t n_head, int64_t n_head_kv,
                  int64_t head_dim, int64_t n_ff) {
  ModelPreset p = make_preset(family, std::move(preset), family, std::move(name), n_vocab, 40960,
                              n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, 1e6f, 1e-6f);
  p.explicit_head_dim = true;
  return p;
}

std::vector<ModelPreset> dense_presets() {
  // `small` has Qwen3-0.6B's widths with 4 layers.
  return {qwen3("qwen3", "tiny", "kiln qwen3 tiny", 0, 256, 2, 4, 2, 128, 768),
          qwen3("qwen3", "small", "kiln qwen3 small", 151936, 1024, 4, 16, 8, 128, 3072)};
}

std::vector<ModelPreset> moe_presets() {
  // 8 experts, 2 used, each expert_feed_forward_length wide. As in
  // Qwen3-30B-A3B, the attention output (n_head * 128) is wider than both
  // n_embd and an expert's FFN; `30b-a3b` has its shapes: 48 layers of 128
  // experts, 8 used, 768 wide (pass --layers to write fewer of them).
  return {with_experts(qwen3("qwen3moe", "tiny", "kiln qwen3moe tiny", 0, 256, 2, 4, 2, 128, 768),
                       8, 2, 128),
          with_experts(
              qwen3("qwen3moe", "small", "kiln qwen3moe small", 151936, 1024, 4, 16, 4, 128, 3072),
              8, 2, 768),
          with_experts(qwen3("qwen3moe", "30b-a3b", "kiln qwen3moe 30b-a3b", 151936, 2048, 48, 32,
                             4, 128, 6144),
                       128, 8, 768)};
}

// Every layer an MoE layer of num_experts experts.
void read_moe_hf(HfConfig& hf) {
  hf.n_expert = hf.get_int("num_experts");
  hf.n_ff = hf.get_int("moe_intermediate_size");
  hf.set_u32("feed_forward_length", hf.optional_int("intermediate_size").value_or(hf.n_ff));
  hf.set_u32("expert_count", hf.n_expert);
  hf.set_u32("expert_used_count", hf.get_int("num_experts_per_tok"));
  hf.set_u32("expert_feed_forward_length", hf.n_ff);
  if (hf.optional_int("decoder_sparse_step").value_or(1) != 1 || hf.non_empty("mlp_only_layers"))
    hf.fail(
        "dense layers among the MoE layers (decoder_sparse_step, mlp_only_layers) are not "
        "supported");
  if (!hf.get_bool("norm_topk_prob", true))
    hf.fail("norm_topk_prob false is not supported (Kiln renormalises the chosen experts)");
}

ArchDesc qwen3_desc(std::string name, std::string hf_type) {
  ArchDesc d;
  d.name = std::move(name);
  d.hf_model_types = {std::move(hf_type)};
  d.qk_norm = true;
  d.build = build_llama;
  return d;
}

}  // namespace

const ArchDesc& qwen3_arch() {
  static const ArchDesc a = [] {
    ArchDesc d = qwen3_desc("qwen3", "qwen3");
    d.presets = dense_presets;
    return d;
  }();
  return a;
}

const ArchDesc& qwen3moe_arch() {
  static const ArchDesc a = [] {
    ArchDesc d = qwen3_desc("qwen3moe", "qwen3_moe");
    d.norm_topk = true;
    d.read_hf = read_moe_hf;
    d.presets = moe_presets;
    return d;
  }();
  return a;
}

}  // namespace kiln
