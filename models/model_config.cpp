#include "models/model_config.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "ir/error.h"
#include "ir/type.h"
#include "models/arch/arch.h"
#include "models/expert_pruning.h"

namespace kiln {

ModelConfig ModelConfig::from_gguf(const GgufFile& f) {
  ModelConfig c;
  c.arch = std::string(f.get_string("general.architecture"));
  const ArchDesc* arch = nullptr;
  try {
    arch = &arch_desc(c.arch);
  } catch (const Error& e) {
    f.fail(e.what());
  }
  auto key = [&](const std::string& k) { return c.arch + "." + k; };
  auto get = [&](const std::string& k) { return static_cast<int64_t>(f.get_u64(key(k))); };
  auto find = [&](const std::string& k, int64_t dflt) {
    auto v = f.find_u64(key(k));
    return v ? static_cast<int64_t>(*v) : dflt;
  };
  c.n_embd = get("embedding_length");
  c.n_layer = get("block_count");
  c.n_head = get("attention.head_count");
  c.n_head_kv = find("attention.head_count_kv", c.n_head);
  c.n_ff = find("feed_forward_length", 0);
  c.n_ctx_train = find("context_length", 2048);
  switch (find("pooling_type", 0)) {
    case 0:  // none: a causal LM, pooled as the mean
    case 1: c.pooling = ModelConfig::Pooling::mean; break;
    case 2: c.pooling = ModelConfig::Pooling::cls; break;
    case 3: c.pooling = ModelConfig::Pooling::last; break;
    default:
      f.fail("key '" + key("pooling_type") + "' is " + std::to_string(find("pooling_type", 0)) +
             " (Kiln pools embeddings by none/mean 0-1, cls 2 or last 3)");
  }
  if (c.n_head <= 0 || c.n_head_kv <= 0 || c.n_head % c.n_head_kv)
    f.fail(std::to_string(c.n_head) + " attention heads cannot share " +
           std::to_string(c.n_head_kv) + " KV heads");
  c.head_dim = find("attention.key_length", c.n_embd / c.n_head);
  if (find("attention.value_length", c.head_dim) != c.head_dim)
    f.fail("key and value head sizes differ, which Kiln does not support");
  c.rope_dim = find("rope.dimension_count", c.head_dim);
  if (auto b = f.find_f32(key("rope.freq_base"))) c.rope_base = *b;
  if (auto e = f.find_f32(key("attention.layer_norm_rms_epsilon"))) c.rms_eps = *e;
  apply_arch_features(*arch, c);
  c.attn_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  // As llama.cpp: a missing scaling type means linear, and the factor may
  // be under its old key; "none" scales nothing.
  auto scaling = f.find_string(key("rope.scaling.type")).value_or("linear");
  auto factor = f.find_f32(key("rope.scaling.factor"));
  if (!factor) factor = f.find_f32(key("rope.scale_linear"));
  if (scaling != "linear" && scaling != "yarn" && scaling != "none")
    f.fail("key '" + key("rope.scaling.type") + "' is '" + std::string(scaling) +
           "' (Kiln reads linear, yarn and none)");
  if (scaling != "none" && factor && *factor > 0) c.rope_scaling.factor = *factor;
  if (scaling == "yarn") {
    c.rope_scaling.yarn = true;
    c.rope_scaling.orig_ctx = static_cast<double>(
        find("rope.scaling.original_context_length", find("context_length", 2048)));
  }
  // A factor on cos and sin whatever the scaling (LongRoPE's
  // sqrt(1 + ln(scale) / ln(original context))), as llama.cpp reads it.
  if (auto a = f.find_f32(key("rope.scaling.attn_factor"))) c.rope_scaling.attn_factor = *a;
  // Llama 3.1's rope scaling, as llama.cpp's converter stores it: a factor
  // dividing each rotated pair's angle; LongRoPE's two sets of them, for
  // contexts within the original one and beyond.
  auto factors = [&](const char* name) {
    std::vector<float> v;
    const GgufTensor* ff = f.find_tensor(name);
    if (!ff) return v;
    if (ff->type != TensorType::f32 || ff->elements() != c.rope_dim / 2)
      f.fail(std::string("tensor '") + name + "' must be F32 with " +
             std::to_string(c.rope_dim / 2) + " values (one per rotated pair), has " +
             tensor_type_name(ff->type) + " with " + std::to_string(ff->elements()));
    v.resize(static_cast<size_t>(ff->elements()));
    std::memcpy(v.data(), ff->data, ff->nbytes);
    for (float x : v)
      if (!(x > 0) || !std::isfinite(x))
        f.fail(std::string("tensor '") + name +
               "' holds a factor that is not positive: " + std::to_string(x));
    return v;
  };
  c.rope_scaling.freq_factors = factors("rope_freqs.weight");
  c.rope_factors_long = factors("rope_factors_long.weight");
  c.rope_factors_short = factors("rope_factors_short.weight");
  if (c.rope_factors_long.empty() != c.rope_factors_short.empty())
    f.fail(
        "LongRoPE needs both tensors 'rope_factors_long.weight' and 'rope_factors_short.weight'");
  if (!c.rope_factors_long.empty())
    c.rope_scaling.orig_ctx = static_cast<double>(
        find("rope.scaling.original_context_length", find("context_length", 2048)));
  if (arch->read_gguf) arch->read_gguf(c, f);
  c.n_expert = find("expert_count", 0);
  c.n_expert_used = find("expert_used_count", 0);
  c.n_ff_exp = find("expert_feed_forward_length", c.n_ff);
  if (c.moe() && (c.n_expert_used <= 0 || c.n_expert_used > c.n_expert))
    f.fail("key '" + key("expert_used_count") + "' is " + std::to_string(c.n_expert_used) +
           ": a token must use 1 to " + key("expert_count") + " (" + std::to_string(c.n_expert) +
           ") experts");
  if (!c.moe() && c.n_ff <= 0) f.fail("missing key '" + key("feed_forward_length") + "'");
  if (c.moe()) {
    // Every expert tensor holds expert_count slices, and so does the router,
    // unless a pruned file kept its full router (its translation table,
    // checked against expert_count, then maps the router's experts).
    const std::vector<int32_t> map = read_expert_map(f, c.n_layer, c.n_expert);
    const int64_t original =
        map.empty() ? c.n_expert : static_cast<int64_t>(map.size()) / c.n_layer;
    c.n_router = f.tensor("blk.0.ffn_gate_inp.weight").shape.back();
    if (c.n_router != c.n_expert && c.n_router != original)
      f.fail("tensor 'blk.0.ffn_gate_inp.weight' routes " + std::to_string(c.n_router) +
             " experts but " + key("expert_count") + " is " + std::to_string(c.n_expert));
    // Every layer's router and expert stacks, shape for shape: an expert
    // count or a width other than the config's is named here, not left to
    // surface as an unnamed matmul mismatch.
    const std::pair<const char*, Shape> moe_tensors[] = {
        {"ffn_gate_inp.weight", {c.n_embd, c.n_router}},
        {"ffn_gate_exps.weight", {c.n_embd, c.n_ff_exp, c.n_expert}},
        {"ffn_up_exps.weight", {c.n_embd, c.n_ff_exp, c.n_expert}},
        {"ffn_down_exps.weight", {c.n_ff_exp, c.n_embd, c.n_expert}}};
    for (int64_t l = 0; l < c.n_layer; ++l)
      for (const auto& [name, shape] : moe_tensors) {
        const std::string t = "blk." + std::to_string(l) + "." + name;
        const GgufTensor* g = f.find_tensor(t);
        if (g && g->shape != shape)
          f.fail("tensor '" + t + "' has shape " + shape_str(g->shape) + ", not " +
                 shape_str(shape) + " (" + key("embedding_length") + " " +
                 std::to_string(c.n_embd) + ", " + key("expert_feed_forward_length") + " " +
                 std::to_string(c.n_ff_exp) + ", " + key("expert_count") + " " +
                 std::to_string(c.n_expert) + ")");
      }
    c.expert_renorm = f.find_bool(kExpertRenormKey).value_or(false);
    if (c.n_router != c.n_expert) c.expert_map = map;
  }
  c.n_vocab = f.tensor("token_embd.weight").shape.at(1);
  c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  return c;
}

void ModelConfig::choose_rope_factors(int64_t n_ctx) {
  if (rope_factors_long.empty()) return;
  rope_scaling.freq_factors =
      static_cast<double>(n_ctx) > rope_scaling.orig_ctx ? rope_factors_long : rope_factors_short;
}

}  // namespace kiln
