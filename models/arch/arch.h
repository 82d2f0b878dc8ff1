// One description per architecture: everything Kiln knows about a model
// family, in the family's own file of this folder.
//
// The config reader (ModelConfig::from_gguf) takes the architecture's
// features from it, the generator (kiln gen-model) its presets and
// tensors, the Hugging Face translator (hf_checkpoint.cpp) its model types,
// tensors with their HF names and its config.json rules, kiln convert its
// tensors, and the forward its builder. Adding an architecture is one file
// here (its ArchDesc, presets and builder) and its entry in arch.cpp's
// table, plus its tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/layers.h"
#include "models/model_presets.h"

namespace kiln {

// What a tensor is for: the generator's type rules (llama.cpp's) look at it,
// and the HF translator reads each kind its own way.
enum class TensorRole {
  token_embd,
  output,
  norm,
  bias,
  router,  // ffn_gate_inp: never quantised
  attn_q,
  attn_k,
  attn_v,
  attn_qkv,  // q, k and v fused (phi3)
  attn_output,
  ffn_gate,
  ffn_up,
  ffn_down,
  rope_factors,  // LongRoPE's per-pair frequency factors
};

// How a Hugging Face checkpoint stores a tensor.
enum class HfForm {
  // One tensor under the text model's prefix ("layers.3.self_attn.q_proj.weight";
  // the output's is the checkpoint's head): matrices as they are or
  // quantized (FP8, INT8, AWQ), norms, biases and routers as F32.
  plain,
  // One tensor per expert (ArchTensor::hf's pattern), stacked.
  experts,
  // GPT-OSS's router and experts (interleaved gate_up, MXFP4 or floats),
  // read together at the router; the tensors after it marked `with_router`.
  gpt_oss_moe,
  with_router,
  // Not a tensor of the checkpoint: made from config.json (LongRoPE's factors).
  from_config,
};

// One tensor of a model, in the order files hold them.
struct ArchTensor {
  std::string name;  // GGUF: "token_embd.weight", "blk.3.attn_q.weight"
  // "layers.3.self_attn.q_proj.weight"; experts "layers.3.mlp.experts.{}.gate_proj"
  // ("{}" the expert's number, ".weight" left off)
  std::string hf;
  std::vector<int64_t> shape;  // ggml order (HF's reversed)
  TensorRole role;
  int layer = -1;  // -1: not a block's
  HfForm form = HfForm::plain;
};

// A Hugging Face config.json as an architecture's rules read it
// (hf_checkpoint.cpp implements it): values by key, errors naming the
// file, and the GGUF keys the architecture writes ("<arch>." + key).
class HfConfig {
 public:
  virtual ~HfConfig() = default;
  virtual int64_t get_int(const std::string& key) = 0;
  virtual std::optional<int64_t> optional_int(const std::string& key) = 0;
  virtual bool get_bool(const std::string& key, bool dflt) = 0;
  virtual double get_float(const std::string& key, double dflt) = 0;
  // The strings of a list (other values as JSON); empty when absent.
  virtual std::vector<std::string> get_strings(const std::string& key) = 0;
  // Whether the key holds something other than null or an empty list.
  virtual bool non_empty(const std::string& key) = 0;
  // The key's nested object's string value ("rope_scaling", "rope_type").
  virtual std::string get_nested_string(const std::string& object, const std::string& key) = 0;
  [[noreturn]] virtual void fail(const std::string& why) = 0;
  virtual void set_u32(const std::string& key, int64_t v) = 0;
  // The shapes read before the rules run.
  int64_t n_embd = 0, n_layer = 0, n_head = 0, head_dim = 0;
  // The FFN shapes the rules find: each expert's (or the dense) width,
  // and the experts (0: dense).
  int64_t n_ff = 0, n_expert = 0;
};

struct ArchDesc {
  std::string name;  // GGUF general.architecture
  // config.json model_type values translated to this architecture.
  std::vector<std::string> hf_model_types;

  // The features the forward reads (ModelConfig's flags of the same names).
  bool rope_neox = true;  // false: llama's interleaved pairs (and HF q/k rows permuted)
  bool qk_norm = false;
  bool qkv_bias = false;  // also allows HF's attention_bias
  bool out_bias = false;
  bool attn_sinks = false;
  bool expert_bias = false;    // and GPT-OSS's clamped SwiGLU
  bool fused_qkv = false;      // attn_qkv: q's rows, then k's, then v's
  bool fused_gate_up = false;  // ffn_up: the gate's rows, then up's
  bool norm_topk = false;      // the chosen experts' weights renormalised
  // Norms after attention and FFN too (Gemma): post_attention_norm,
  // ffn_norm (HF's pre_feedforward_layernorm) and post_ffw_norm.
  bool post_norms = false;
  // The FFN's pre-norm is named post_attention_norm and no ffn_norm exists (GPT-OSS).
  bool ffn_norm_named_post_attention = false;
  // HF names of an MoE layer's router and experts (gate, up, down; "{}"
  // the expert's number, ".weight" left off): Qwen3-MoE's by default.
  std::string hf_router = "mlp.gate.weight";
  std::vector<std::string> hf_experts = {"mlp.experts.{}.gate_proj", "mlp.experts.{}.up_proj",
                                         "mlp.experts.{}.down_proj"};
  // HF: Gemma's norms multiply by 1 + w, so GGUF stores w + 1; Gemma ties
  // its output to the embeddings unless told otherwise.
  float hf_norm_shift = 0;
  bool hf_tied_default = false;
  bool hf_mxfp4_experts = false;  // quant_method mxfp4: GPT-OSS's experts
  bool hf_longrope = false;       // rope_scaling longrope (su): rope_factors_long/short
  // tokenizer.ggml.pre of the generator's byte-level vocabulary, and the
  // control tokens it adds (llama.cpp's loader looks some up by name).
  std::string tokenizer_pre = "default";
  std::vector<std::string> vocab_specials;

  ArchBuilder build = nullptr;
  // Metadata beyond the keys every architecture shares (windows, scales,
  // refusals), read after them.
  void (*read_gguf)(ModelConfig& c, const GgufFile& f) = nullptr;
  // config.json's FFN, expert and window keys into HfConfig's shapes and
  // GGUF keys; null: a dense FFN of intermediate_size.
  void (*read_hf)(HfConfig& hf) = nullptr;
  // The tensors of a model of this architecture; null: decoder_tensors.
  std::vector<ArchTensor> (*tensors)(const ArchDesc& a, const ModelConfig& c) = nullptr;
  std::vector<ModelPreset> (*presets)() = nullptr;

  std::vector<ArchTensor> tensor_list(const ModelConfig& c) const {
    return tensors ? tensors(*this, c) : decoder_tensors(*this, c);
  }
  // A pre-norm decoder's tensors (llama's, with this description's
  // biases, q/k norms, post-norms and experts).
  static std::vector<ArchTensor> decoder_tensors(const ArchDesc& a, const ModelConfig& c);
};

// The description's features in a config (ModelConfig's flags).
void apply_arch_features(const ArchDesc& a, ModelConfig& c);
// The config a preset's model will have, for its tensor list.
ModelConfig preset_config(const ModelPreset& p, int64_t n_vocab);

// Every architecture, in a stable order.
const std::vector<const ArchDesc*>& arch_descs();
// The architecture of a GGUF general.architecture, or an Error listing them.
const ArchDesc& arch_desc(std::string_view name);
// The architecture a config.json model_type is translated to, or null.
const ArchDesc* arch_for_hf_model_type(std::string_view model_type);

// llama's pre-norm block, which qwen2 and qwen3 share.
Tensor build_llama(Forward& f);

// The descriptions, one per file of this folder.
const ArchDesc& llama_arch();
const ArchDesc& qwen2_arch();
const ArchDesc& qwen3_arch();
const ArchDesc& qwen3moe_arch();
const ArchDesc& gemma3_arch();
const ArchDesc& gpt_oss_arch();
const ArchDesc& phi3_arch();

}  // namespace kiln
