// Gemma 3: embeddings scaled by sqrt(n_embd); each sub-layer's output is
// normed again before it joins the residual stream; GeGLU (tanh GELU) FFN;
// q/k norms. Every 6th layer is global and the others attend to the last
// ModelConfig::sliding_window positions with rope base 10000 and no
// scaling (Forward::attention), as llama.cpp runs it. The GGUF converter
// stores the norms' weights with Gemma's +1 already added, so they are
// plain RMSNorms here.
#include <cmath>

#include "models/arch/arch.h"

namespace kiln {

Tensor build_gemma3(Forward& f) {
  auto blk = Forward::blk;
  Tensor x = f.embed(std::sqrt(static_cast<double>(f.c.n_embd)));
  for (int64_t l = 0; l < f.c.n_layer; ++l) {
    Tensor h = f.attention(l, f.norm(x, blk(l, "attn_norm.weight")));
    x = f.named(f.add(x, f.norm(h, blk(l, "post_attention_norm.weight"))), "sa_out", l);
    h = f.ffn(l, f.norm(x, blk(l, "ffn_norm.weight")), Activation::gelu_tanh);
    x = f.named(f.add(x, f.norm(h, blk(l, "post_ffw_norm.weight"))), "l_out", l);
  }
  return f.logits(x);
}

namespace {

// q/k norms, pre- and post-norms, a tied output, heads of head_dim
// whatever n_embd / n_head is, the window written as llama.cpp's
// converter does.
ModelPreset gemma3(std::string preset, std::string name, int64_t n_vocab, int64_t n_ctx,
                   int64_t n_embd, int64_t n_layer, int64_t n_head, int64_t n_head_kv,
                   int64_t head_dim, int64_t n_ff, int64_t window) {
  ModelPreset p =
      make_preset("gemma3", std::move(preset), "gemma3", std::move(name), n_vocab, n_ctx, n_embd,
                  n_layer, n_head, n_head_kv, head_dim, n_ff, 1e6f, 1e-6f);
  p.explicit_head_dim = true;
  p.tied_embeddings = true;
  p.sliding_window = window;
  return p;
}

std::vector<ModelPreset> presets() {
  // `tiny` has 6 layers, so both windowed and global ones, and n_head *
  // head_dim wider than n_embd; `1b` is Gemma 3 1B's shapes.
  return {gemma3("tiny", "kiln gemma3 tiny", 0, 2048, 256, 6, 4, 2, 128, 768, 512),
          gemma3("1b", "kiln gemma3 1b", 262144, 32768, 1152, 26, 4, 1, 256, 6912, 512)};
}

void read_gguf(ModelConfig& c, const GgufFile& f) {
  const std::string key = c.arch + ".";
  c.sliding_window = static_cast<int64_t>(f.find_u64(key + "attention.sliding_window").value_or(0));
  if (c.sliding_window > 0) {
    c.swa_pattern = 6;
    c.rope_base_swa = 10000;
  }
  // The 27B model (62 layers) scales q.k by its n_embd / n_head instead of
  // its head size.
  if (c.n_layer == 62) c.attn_scale = 1.0 / std::sqrt(static_cast<double>(c.n_embd / c.n_head));
  // llama.cpp caps gemma3 logits when this is set (Gemma 3 itself does not).
  if (auto cap = f.find_f32(key + "final_logit_softcapping"); cap && *cap != 0)
    f.fail("key '" + key + "final_logit_softcapping' (logit soft-capping) is not supported");
}

// Gemma 3's local layers as llama.cpp lays them out: a config that says
// otherwise is refused rather than run wrongly.
void read_hf(HfConfig& hf) {
  hf.n_ff = hf.get_int("intermediate_size");
  hf.set_u32("feed_forward_length", hf.n_ff);
  const int64_t window = hf.optional_int("sliding_window").value_or(0);
  if (window > 0) hf.set_u32("attention.sliding_window", window);
  if (hf.optional_int("sliding_window_pattern").value_or(6) != 6)
    hf.fail("sliding_window_pattern other than 6 is not supported");
  const std::vector<std::string> types = hf.get_strings("layer_types");
  for (size_t l = 0; l < types.size(); ++l)
    if ((types[l] == "full_attention") != (l % 6 == 5))
      hf.fail("layer_types: layer " + std::to_string(l) +
              " is not where Gemma 3's 5 local : 1 global pattern puts it");
  if (hf.get_float("rope_local_base_freq", 10000) != 10000)
    hf.fail("rope_local_base_freq other than 10000 is not supported");
  for (const char* cap : {"final_logit_softcapping", "attn_logit_softcapping"})
    if (hf.get_float(cap, 0) != 0) hf.fail(std::string(cap) + " is not supported");
  const double qpas = hf.get_float("query_pre_attn_scalar", static_cast<double>(hf.head_dim));
  const double want = hf.n_layer == 62 ? static_cast<double>(hf.n_embd / hf.n_head)
                                       : static_cast<double>(hf.head_dim);
  if (qpas != want)
    hf.fail("query_pre_attn_scalar " + std::to_string(qpas) + " is not the " +
            std::to_string(want) + " Kiln scales q.k by");
}

}  // namespace

const ArchDesc& gemma3_arch() {
  static const ArchDesc a = [] {
    ArchDesc d;
    d.name = "gemma3";
    d.hf_model_types = {"gemma3_text"};
    d.qk_norm = true;
    d.post_norms = true;
    d.hf_norm_shift = 1;
    d.hf_tied_default = true;
    d.build = build_gemma3;
    d.read_gguf = read_gguf;
    d.read_hf = read_hf;
    d.presets = presets;
    return d;
  }();
  return a;
}

}  // namespace kiln
