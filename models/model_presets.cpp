#include "models/model_presets.h"

#include <algorithm>

#include "ir/error.h"
#include "models/arch/arch.h"

namespace kiln {

ModelPreset make_preset(std::string family, std::string preset, std::string arch, std::string name,
                        int64_t n_vocab, int64_t n_ctx, int64_t n_embd, int64_t n_layer,
                        int64_t n_head, int64_t n_head_kv, int64_t head_dim, int64_t n_ff,
                        float rope_base, float rms_eps) {
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

ModelPreset with_experts(ModelPreset p, int64_t n_expert, int64_t n_used, int64_t n_ff_exp) {
  p.n_expert = n_expert;
  p.n_expert_used = n_used;
  p.n_ff_exp = n_ff_exp;
  return p;
}

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = [] {
    std::vector<ModelPreset> all;
    for (const ArchDesc* a : arch_descs())
      if (a->presets)
        for (ModelPreset& p : a->presets()) all.push_back(std::move(p));
    return all;
  }();
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
