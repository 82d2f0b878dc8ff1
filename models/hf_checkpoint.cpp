#include "models/hf_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "ir/dtype.h"
#include "ir/error.h"
#include "ir/type.h"
#include "kernels/quant/awq.h"
#include "models/arch/arch.h"
#include "models/hf_tokenizer.h"
#include "models/read_file.h"
#include "models/safetensors.h"

namespace kiln {

namespace fs = std::filesystem;
using nlohmann::json;

// What a GgufFile opened from the folder needs alive: the mapped shards and
// the few tensors the translation rewrote.
struct HfCheckpoint::Parts {
  SafetensorsCheckpoint st;
  std::map<std::string, const uint8_t*> data;  // GGUF name -> bytes
  std::vector<std::vector<uint8_t>> owned;
};

namespace {

// The architecture a config.json model_type is translated to (models/arch/);
// "gemma3" is Gemma 3's multimodal wrapper, run as its text model.
const ArchDesc& hf_arch(const std::string& model_type) {
  if (const ArchDesc* a = arch_for_hf_model_type(model_type)) return *a;
  std::string known;
  for (const ArchDesc* a : arch_descs())
    for (const std::string& t : a->hf_model_types) known += (known.empty() ? "" : ", ") + t;
  throw Error("model_type '" + model_type + "' is not supported (" + known + ", gemma3)");
}

class Translator {
 public:
  Translator(const std::string& dir, HfWeights weights, HfCheckpoint::Parts& parts, GgufWriter& w)
      : dir_(dir),
        config_path_((fs::path(dir) / "config.json").string()),
        weights_(weights),
        p_(parts),
        w_(w) {}

  void run() {
    cfg_ = read_json_object(config_path_);
    if (!cfg_.contains("model_type") || !cfg_["model_type"].is_string())
      fail_config("no model_type");
    if (cfg_["model_type"] == "gemma3") gemma3_text_model();
    desc_ = &hf_arch(cfg_["model_type"].get<std::string>());
    arch_ = desc_->name;
    metadata();
    add_hf_tokenizer(dir_, optional_int("bos_token_id"), optional_int("eos_token_id"), n_vocab_,
                     w_);
    tensors();
  }

 private:
  [[noreturn]] void fail_config(const std::string& what) const {
    throw Error("config.json '" + config_path_ + "': " + what);
  }
  int64_t get_int(const char* key) const {
    auto v = optional_int(key);
    if (!v) fail_config(std::string("missing integer '") + key + "'");
    return *v;
  }
  std::optional<int64_t> optional_int(const char* key) const {
    auto it = cfg_.find(key);
    if (it == cfg_.end() || it->is_null()) return std::nullopt;
    // eos_token_id may list several ids; the first is the one generation stops on.
    const json& v = it->is_array() && !it->empty() ? (*it)[0] : *it;
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      fail_config(std::string("'") + key + "' is not a non-negative integer: " + it->dump());
    return v.get<int64_t>();
  }
  double get_float(const char* key, double dflt) const {
    auto it = cfg_.find(key);
    if (it == cfg_.end() || it->is_null()) return dflt;
    if (!it->is_number()) fail_config(std::string("'") + key + "' is not a number");
    return it->get<double>();
  }
  bool get_bool(const char* key, bool dflt) const {
    auto it = cfg_.find(key);
    if (it == cfg_.end() || it->is_null()) return dflt;
    if (!it->is_boolean()) fail_config(std::string("'") + key + "' is not true or false");
    return it->get<bool>();
  }
  std::string key(const std::string& k) const { return arch_ + "." + k; }

  // config.json as the architecture's rules read it (ArchDesc::read_hf).
  class Rules : public HfConfig {
   public:
    explicit Rules(Translator& t) : t_(t) {}
    int64_t get_int(const std::string& key) override { return t_.get_int(key.c_str()); }
    std::optional<int64_t> optional_int(const std::string& key) override {
      return t_.optional_int(key.c_str());
    }
    bool get_bool(const std::string& key, bool dflt) override {
      return t_.get_bool(key.c_str(), dflt);
    }
    double get_float(const std::string& key, double dflt) override {
      return t_.get_float(key.c_str(), dflt);
    }
    std::vector<std::string> get_strings(const std::string& key) override {
      std::vector<std::string> out;
      auto it = t_.cfg_.find(key);
      if (it == t_.cfg_.end() || !it->is_array()) return out;
      for (const json& v : *it) out.push_back(v.is_string() ? v.get<std::string>() : v.dump());
      return out;
    }
    bool non_empty(const std::string& key) override {
      auto it = t_.cfg_.find(key);
      return it != t_.cfg_.end() && !it->is_null() &&
             !((it->is_array() || it->is_object()) && it->empty());
    }
    std::string get_nested_string(const std::string& object, const std::string& key) override {
      auto it = t_.cfg_.find(object);
      if (it == t_.cfg_.end() || !it->is_object()) return "";
      auto v = it->find(key);
      return v != it->end() && v->is_string() ? v->get<std::string>() : std::string();
    }
    [[noreturn]] void fail(const std::string& why) override { t_.fail_config(why); }
    void set_u32(const std::string& key, int64_t v) override { t_.u32(key, v); }

   private:
    Translator& t_;
  };

  // Gemma3ForConditionalGeneration runs as its text model, as llama.cpp's
  // converter writes it (the vision tower goes to a separate mmproj file,
  // which Kiln does not read): text_config, with Gemma3TextConfig's
  // defaults where the file leaves them out (transformers writes only what
  // differs), and the tensors under language_model.model. (or
  // model.language_model. in newer folders).
  void gemma3_text_model() {
    json text = cfg_.value("text_config", json::object());
    if (!text.is_object()) fail_config("text_config is not an object");
    const json defaults = {{"vocab_size", 262208},
                           {"hidden_size", 2304},
                           {"intermediate_size", 9216},
                           {"num_hidden_layers", 26},
                           {"num_attention_heads", 8},
                           {"num_key_value_heads", 4},
                           {"head_dim", 256},
                           {"max_position_embeddings", 131072},
                           {"rms_norm_eps", 1e-6},
                           {"rope_theta", 1000000.0},
                           {"query_pre_attn_scalar", 256},
                           {"sliding_window", 4096},
                           {"tie_word_embeddings", true}};
    for (const auto& [k, v] : defaults.items())
      if (!text.contains(k)) text[k] = v;
    for (const char* k : {"bos_token_id", "eos_token_id"})
      if (!text.contains(k) && cfg_.contains(k)) text[k] = cfg_[k];
    text["model_type"] = "gemma3_text";
    cfg_ = text;
    prefix_ = p_.st.find("model.language_model.embed_tokens.weight") ? "model.language_model."
                                                                     : "language_model.model.";
    head_ = prefix_ == "language_model.model." ? "language_model.lm_head.weight" : "lm_head.weight";
    not_read_ = {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                 "model.multi_modal_projector."};
  }

  void metadata() {
    n_embd_ = get_int("hidden_size");
    n_layer_ = get_int("num_hidden_layers");
    n_head_ = get_int("num_attention_heads");
    n_head_kv_ = optional_int("num_key_value_heads").value_or(n_head_);
    if (n_head_ <= 0 || n_head_kv_ <= 0 || n_head_ % n_head_kv_)
      fail_config(std::to_string(n_head_) + " attention heads cannot share " +
                  std::to_string(n_head_kv_) + " KV heads");
    head_dim_ = optional_int("head_dim").value_or(n_embd_ / n_head_);
    n_vocab_ = get_int("vocab_size");
    tied_ = get_bool("tie_word_embeddings", desc_->hf_tied_default);
    if (get_float("partial_rotary_factor", 1.0) != 1.0)
      fail_config("partial_rotary_factor other than 1 is not supported");
    if (get_bool("use_sliding_window", false))
      fail_config("use_sliding_window: sliding-window attention is not supported for " + arch_);
    if (get_bool("attention_bias", false) && !desc_->qkv_bias)
      fail_config("attention_bias: biased attention projections are not supported for " + arch_);

    w_.add("general.architecture", GgufWriter::str(arch_));
    w_.add("general.type", GgufWriter::str("model"));
    w_.add("general.name", GgufWriter::str(fs::path(dir_).filename().string()));
    u32("vocab_size", n_vocab_);
    u32("context_length", optional_int("max_position_embeddings").value_or(2048));
    u32("embedding_length", n_embd_);
    u32("block_count", n_layer_);
    u32("attention.head_count", n_head_);
    u32("attention.head_count_kv", n_head_kv_);
    u32("rope.dimension_count", head_dim_);
    if (cfg_.contains("head_dim")) {
      u32("attention.key_length", head_dim_);
      u32("attention.value_length", head_dim_);
    }
    w_.add(key("rope.freq_base"),
           GgufWriter::f32(static_cast<float>(get_float("rope_theta", 10000))));
    w_.add(key("attention.layer_norm_rms_epsilon"),
           GgufWriter::f32(static_cast<float>(get_float("rms_norm_eps", 1e-5))));
    rope_scaling();
    quantization();
    Rules rules(*this);
    rules.n_embd = n_embd_;
    rules.n_layer = n_layer_;
    rules.n_head = n_head_;
    rules.head_dim = head_dim_;
    if (desc_->read_hf) {
      desc_->read_hf(rules);
    } else {
      rules.n_ff = get_int("intermediate_size");
      u32("feed_forward_length", rules.n_ff);
    }
    n_ff_ = rules.n_ff;
    n_expert_ = rules.n_expert;
  }

  void u32(const std::string& k, int64_t v) {
    w_.add(key(k), GgufWriter::u32(static_cast<uint32_t>(v)));
  }

  // quantization_config: which quantized weight formats to expect.
  void quantization() {
    auto it = cfg_.find("quantization_config");
    if (it == cfg_.end() || it->is_null()) return;
    if (!it->is_object()) fail_config("quantization_config is not an object");
    const json& q = *it;
    const std::string method = q.value("quant_method", std::string());
    if (method == "awq") return awq_config(q);
    if (method == "compressed-tensors") return int8_config(q);
    if (method == "mxfp4") {  // GPT-OSS's experts: ggml has the format
      if (!desc_->hf_mxfp4_experts)
        fail_config("quantization_config.quant_method mxfp4 is read for gpt_oss's experts only");
      return;
    }
    if (method != "fp8")
      fail_config("quantization_config.quant_method '" + method +
                  "' is not supported (Kiln reads fp8 block-scaled, awq, compressed-tensors "
                  "int8 and gpt_oss's mxfp4 checkpoints)");
    if (q.value("fmt", std::string("e4m3")) != "e4m3")
      fail_config("quantization_config.fmt '" + q["fmt"].get<std::string>() +
                  "' is not supported (e4m3)");
    auto bs = q.find("weight_block_size");
    if (bs == q.end() || !bs->is_array() || bs->size() != 2 || !(*bs)[0].is_number_integer() ||
        (*bs)[0] != (*bs)[1] || (*bs)[0].get<int64_t>() <= 0 || (*bs)[0].get<int64_t>() % 16)
      fail_config(
          "quantization_config.weight_block_size must be [B, B], B a multiple of 16 (square "
          "blocks of scales that whole steps of the matmuls fit in): " +
          (bs == q.end() ? std::string("missing") : bs->dump()));
    fp8_block_ = (*bs)[0].get<int64_t>();
    if (weights_ == HfWeights::as_stored)
      w_.add(kWeightBlockSizeKey, GgufWriter::u32(static_cast<uint32_t>(fp8_block_)));
  }

  // AutoAWQ: 4 bits, zero points, GEMM packing, a group size int4w has.
  void awq_config(const json& q) {
    auto num = [&](const char* key) {
      auto it = q.find(key);
      return it != q.end() && it->is_number_integer() ? it->get<int64_t>() : -1;
    };
    if (num("bits") != 4 || !q.value("zero_point", false) ||
        (q.contains("version") && q["version"] != "gemm"))
      fail_config(
          "quantization_config: Kiln reads AWQ with bits 4, zero_point true and version "
          "gemm: " +
          q.dump());
    awq_group_ = num("group_size");
    if (awq_group_ != 32 && awq_group_ != 64 && awq_group_ != 128)
      fail_config("quantization_config.group_size " + std::to_string(awq_group_) +
                  " is not supported (32, 64, 128)");
  }

  // compressed-tensors: one group of int8 weights per output channel with
  // dynamic int8 activations per token (w8a8), nothing else.
  void int8_config(const json& q) {
    auto groups = q.find("config_groups");
    const bool one = groups != q.end() && groups->is_object() && groups->size() == 1;
    const json g = one ? groups->begin().value() : json::object();
    auto is = [&](const char* part, const char* key, const json& want) {
      return g.contains(part) && g[part].is_object() && g[part].value(key, json()) == want;
    };
    if (!one || !is("weights", "num_bits", 8) || !is("weights", "type", "int") ||
        !is("weights", "symmetric", true) || !is("weights", "strategy", "channel") ||
        !is("input_activations", "num_bits", 8) || !is("input_activations", "type", "int") ||
        !is("input_activations", "strategy", "token") || !is("input_activations", "dynamic", true))
      fail_config(
          "quantization_config: Kiln reads compressed-tensors int8 w8a8 (one config group: "
          "symmetric int8 weights per channel, dynamic int8 activations per token): " +
          q.dump());
    int8_ = true;
  }

  void rope_scaling() {
    auto it = cfg_.find("rope_scaling");
    if (it == cfg_.end() || it->is_null()) return;
    if (!it->is_object()) fail_config("rope_scaling is not an object");
    const json& rs = *it;
    std::string type = rs.value("rope_type", rs.value("type", std::string("default")));
    if (type == "default") return;
    if (type == "llama3") return llama3_rope_factors(rs);
    if ((type == "longrope" || type == "su") && desc_->hf_longrope) return longrope_factors(rs);
    if (type != "linear" && type != "yarn")
      fail_config("rope_scaling type '" + type + "' is not supported (linear, yarn, llama3" +
                  (desc_->hf_longrope ? ", longrope" : "") + ")");
    if (!rs.contains("factor") || !rs["factor"].is_number())
      fail_config("rope_scaling has no numeric factor");
    w_.add(key("rope.scaling.type"), GgufWriter::str(type));
    w_.add(key("rope.scaling.factor"), GgufWriter::f32(rs["factor"].get<float>()));
    if (type == "yarn" &&
        (rs.value("beta_fast", 32.0) != 32.0 || rs.value("beta_slow", 1.0) != 1.0))
      fail_config("rope_scaling yarn with beta_fast/beta_slow other than 32/1 is not supported");
    if (type == "yarn" && rs.contains("original_max_position_embeddings"))
      w_.add(key("rope.scaling.original_context_length"),
             GgufWriter::u32(rs["original_max_position_embeddings"].get<uint32_t>()));
  }

  // LongRoPE (Phi-3) as llama.cpp's converter writes it: the long and short
  // factors per rotated pair as rope_factors_long/short, the original
  // context, and cos and sin scaled by sqrt(1 + ln(scale) / ln(original)),
  // scale the context's growth over the original.
  void longrope_factors(const json& rs) {
    const int64_t orig = optional_int("original_max_position_embeddings")
                             .value_or(rs.value("original_max_position_embeddings", int64_t{0}));
    const int64_t ctx = optional_int("max_position_embeddings").value_or(0);
    if (orig <= 0 || ctx <= 0)
      fail_config(
          "rope_scaling longrope needs original_max_position_embeddings and "
          "max_position_embeddings");
    const double scale = static_cast<double>(ctx) / static_cast<double>(orig);
    const double attn =
        scale > 1 ? std::sqrt(1 + std::log(scale) / std::log(static_cast<double>(orig))) : 1.0;
    u32("rope.scaling.original_context_length", orig);
    w_.add(key("rope.scaling.attn_factor"), GgufWriter::f32(static_cast<float>(attn)));
    for (const char* which : {"long", "short"}) {
      const std::string name = std::string(which) + "_factor";
      auto f = rs.find(name);
      if (f == rs.end() || !f->is_array() || static_cast<int64_t>(f->size()) != head_dim_ / 2)
        fail_config("rope_scaling." + name + " must list " + std::to_string(head_dim_ / 2) +
                    " factors (one per rotated pair)");
      std::vector<float> v;
      for (const json& x : *f) {
        if (!x.is_number() || !(x.get<double>() > 0))
          fail_config("rope_scaling." + name + " holds a factor that is not positive: " + x.dump());
        v.push_back(x.get<float>());
      }
      add_floats(std::string("rope_factors_") + which + ".weight", TensorType::f32,
                 {static_cast<int64_t>(v.size())}, v);
    }
  }

  // Llama 3.1's scaling as llama.cpp's converter writes it: a factor per
  // rotated pair in rope_freqs.weight (1 for short wavelengths, `factor`
  // for long ones, a smooth blend between).
  void llama3_rope_factors(const json& rs) {
    const double base = get_float("rope_theta", 10000), factor = rs.value("factor", 8.0);
    const double low = rs.value("low_freq_factor", 1.0), high = rs.value("high_freq_factor", 4.0);
    const double old_ctx = rs.value(
        "original_max_position_embeddings",
        static_cast<double>(optional_int("original_max_position_embeddings").value_or(8192)));
    if (!(factor > 0) || !(high > low))
      fail_config("rope_scaling llama3 needs factor > 0 and high_freq_factor > low_freq_factor");
    std::vector<float> f;
    for (int64_t i = 0; i < head_dim_; i += 2) {
      const float freq = static_cast<float>(
          1.0 / std::pow(base, static_cast<double>(i) / static_cast<double>(head_dim_)));
      const double wavelen = 2 * M_PI / freq;
      if (wavelen < old_ctx / high) {
        f.push_back(1);
      } else if (wavelen > old_ctx / low) {
        f.push_back(static_cast<float>(factor));
      } else {
        const double smooth = (old_ctx / wavelen - low) / (high - low);
        f.push_back(static_cast<float>(1 / ((1 - smooth) / factor + smooth)));
      }
    }
    add_floats("rope_freqs.weight", TensorType::f32, {static_cast<int64_t>(f.size())}, f);
  }

  // `fp8`: the tensor may be a block-scaled FP8 matrix.
  const SafeTensor& take(const std::string& hf, const std::vector<int64_t>& shape,
                         bool fp8 = false) {
    const SafeTensor* t = p_.st.find(hf);
    if (!t) throw Error("Hugging Face folder '" + dir_ + "': missing tensor '" + hf + "'");
    if (t->shape != shape)
      throw Error("tensor '" + hf + "' in '" + *t->file + "' has shape " + shape_str(t->shape) +
                  "; config.json '" + config_path_ + "' implies " + shape_str(shape));
    if (t->dtype == StDtype::f8_e4m3 && fp8 && !fp8_block_)
      throw Error("tensor '" + hf + "' in '" + *t->file + "' is F8_E4M3 but config.json '" +
                  config_path_ +
                  "' has no quantization_config with quant_method fp8 and weight_block_size");
    if (t->dtype == StDtype::i8 && fp8 && !int8_)
      throw Error("tensor '" + hf + "' in '" + *t->file + "' is I8 but config.json '" +
                  config_path_ + "' has no compressed-tensors int8 quantization_config");
    if (t->dtype != StDtype::f32 && t->dtype != StDtype::f16 && t->dtype != StDtype::bf16 &&
        !(fp8 && (t->dtype == StDtype::f8_e4m3 || t->dtype == StDtype::i8)))
      throw Error("tensor '" + hf + "' in '" + *t->file + "' has dtype " + st_dtype_name(t->dtype) +
                  ": Kiln reads F32, F16 and BF16 weights from safetensors" +
                  (fp8 ? ", F8_E4M3 with block scales and I8 with channel scales" : " here"));
    used_.insert(hf);
    return *t;
  }

  static TensorType ggml_type_of(StDtype t) {
    return t == StDtype::f32   ? TensorType::f32
           : t == StDtype::f16 ? TensorType::f16
                               : TensorType::bf16;
  }

  // GGUF's shape is HF's reversed (ggml lists the contiguous dimension first).
  void add(const std::string& name, TensorType type, std::vector<int64_t> hf_shape,
           const uint8_t* bytes) {
    std::vector<int64_t> ne(hf_shape.rbegin(), hf_shape.rend());
    p_.data[name] = bytes;
    // The producer outlives this translator: it holds the bytes themselves.
    const uint64_t size = GgufWriter::tensor_bytes(name, type, ne);
    w_.add_tensor(name, type, ne,
                  [bytes, size](const GgufWriter::ByteSink& sink) { sink(bytes, size); });
  }

  const uint8_t* own(std::vector<uint8_t> bytes) {
    p_.owned.push_back(std::move(bytes));
    return p_.owned.back().data();
  }
  template <class T>
  const uint8_t* own(const std::vector<T>& v) {
    const auto* b = reinterpret_cast<const uint8_t*>(v.data());
    return own(std::vector<uint8_t>(b, b + v.size() * sizeof(T)));
  }
  // f32 values stored as `type` (F32, F16, BF16: rounded to nearest even).
  void add_floats(const std::string& name, TensorType type, std::vector<int64_t> hf_shape,
                  const std::vector<float>& w) {
    std::vector<uint8_t> out(w.size() * static_cast<size_t>(tensor_type_info(type).block_bytes));
    ggml_from_f32(type, w.data(), static_cast<int64_t>(w.size()), out.data());
    add(name, type, std::move(hf_shape), own(std::move(out)));
  }

  // A matrix as it is, or with llama's q/k rows permuted. `fp8`: it may be
  // block-scaled FP8 (every linear layer's but the embeddings').
  void matrix(const std::string& name, const std::string& hf, int64_t rows, int64_t cols,
              int64_t permute_heads = 0, bool fp8 = true) {
    const std::string base = hf.substr(0, hf.size() - std::string(".weight").size());
    if (fp8 && awq_group_ && !p_.st.find(hf) && p_.st.find(base + ".qweight"))
      return awq_matrix(name, base, rows, cols, permute_heads);
    const SafeTensor& t = take(hf, {rows, cols}, fp8);
    if (t.dtype == StDtype::f8_e4m3) return fp8_matrix(name, t, permute_heads);
    if (t.dtype == StDtype::i8) return int8_matrix(name, t, permute_heads);
    const uint8_t* bytes = t.data;
    if (permute_heads > 0) bytes = own(permute_rows(t, permute_heads));
    add(name, ggml_type_of(t.dtype), t.shape, bytes);
  }

  // An FP8 matrix and its scales (HF: NAME_scale_inv, the factor the
  // weights are multiplied by), checked, as hf_checkpoint.h describes.
  void fp8_matrix(const std::string& name, const SafeTensor& t, int64_t permute_heads) {
    const int64_t rows = t.shape[0], cols = t.shape[1], b = fp8_block_;
    std::vector<float> scale = fp8_scales(t);
    const uint8_t* bytes = t.data;
    if (permute_heads > 0) {
      // Rows move within a head; the scales stay right while every head
      // lies inside one block of rows.
      if (b % (rows / permute_heads))
        throw Error("tensor '" + t.name + "': heads of " + std::to_string(rows / permute_heads) +
                    " rows straddle its " + std::to_string(b) +
                    "-row scale blocks, so its rows cannot take GGUF's order");
      bytes = own(permute_rows(t, permute_heads));
    }
    if (weights_ == HfWeights::dequantized)
      return add_floats(name, TensorType::bf16, t.shape, fp8_dequantize(bytes, scale, rows, cols));
    add(name, TensorType::f8_e4m3, t.shape, bytes);
    add(name + kBlockScaleSuffix, TensorType::f32, {(rows + b - 1) / b, (cols + b - 1) / b},
        own(scale));
  }

  // An FP8 matrix's scales (HF: NAME_scale_inv, the factor the weights are
  // multiplied by), its bytes checked for NaN.
  std::vector<float> fp8_scales(const SafeTensor& t) {
    const int64_t b = fp8_block_;
    const SafeTensor& s =
        take(t.name + "_scale_inv", {(t.shape[0] + b - 1) / b, (t.shape[1] + b - 1) / b}, false);
    for (size_t i = 0; i < t.nbytes; ++i)
      if ((t.data[i] & 0x7F) == 0x7F)
        throw Error("tensor '" + t.name + "' in '" + *t.file + "' holds an FP8 NaN (byte " +
                    std::to_string(i) + ")");
    std::vector<float> scale(static_cast<size_t>(s.elements()));
    ggml_to_f32(ggml_type_of(s.dtype), s.data, s.elements(), scale.data());
    return scale;
  }

  std::vector<float> fp8_dequantize(const uint8_t* bytes, const std::vector<float>& scale,
                                    int64_t rows, int64_t cols) const {
    const int64_t b = fp8_block_;
    std::vector<float> w(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        w[r * cols + c] =
            f8e4m3_bits_to_f32(bytes[r * cols + c]) * scale[(r / b) * ((cols + b - 1) / b) + c / b];
    return w;
  }

  // HF orders each head's rows as two halves (rotate_half), GGUF's llama as
  // interleaved pairs: GGUF row 2i + j of a head is HF row j * d/2 + i.
  // Read straight from the mapped file: a copy of it first would double
  // what loading writes (q and k are a tenth of a llama's weights).
  static std::vector<uint8_t> permute_rows(const SafeTensor& t, int64_t heads) {
    return permute_rows(t.data, t.nbytes, t.shape[0], heads);
  }
  // The same for `rows` rows of any element type (codes, scales, zero points).
  template <class T>
  static std::vector<T> permute_rows(const std::vector<T>& in, int64_t rows, int64_t heads) {
    return permute_rows(in.data(), in.size(), rows, heads);
  }
  template <class T>
  static std::vector<T> permute_rows(const T* in, size_t n, int64_t rows, int64_t heads) {
    const int64_t d = rows / heads;
    const size_t row = n / static_cast<size_t>(rows);
    std::vector<T> out(n);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < d / 2; ++i)
        for (int64_t j = 0; j < 2; ++j)
          std::copy_n(in + (h * d + j * (d / 2) + i) * static_cast<int64_t>(row), row,
                      out.begin() + static_cast<ptrdiff_t>((h * d + 2 * i + j) * row));
    return out;
  }

  // An INT8 matrix and its per-row scales (HF: NAME_scale [rows, 1]).
  void int8_matrix(const std::string& name, const SafeTensor& t, int64_t permute_heads) {
    const int64_t rows = t.shape[0], cols = t.shape[1];
    std::vector<float> scale = int8_scales(t);
    std::vector<uint8_t> q(t.data, t.data + t.nbytes);
    if (permute_heads > 0) {
      q = permute_rows(q, rows, permute_heads);
      scale = permute_rows(scale, rows, permute_heads);
    }
    if (weights_ == HfWeights::dequantized)
      return add_floats(name, TensorType::bf16, t.shape,
                        int8_dequantize(q.data(), scale, rows, cols));
    add(name, TensorType::i8_channel, t.shape, own(std::move(q)));
    add(name + kBlockScaleSuffix, TensorType::f32, {rows}, own(scale));
  }

  // An INT8 matrix's scales (HF: NAME_scale [rows, 1]).
  std::vector<float> int8_scales(const SafeTensor& t) {
    const SafeTensor& s = take(t.name + "_scale", {t.shape[0], 1});
    std::vector<float> scale(static_cast<size_t>(t.shape[0]));
    ggml_to_f32(ggml_type_of(s.dtype), s.data, t.shape[0], scale.data());
    return scale;
  }

  static std::vector<float> int8_dequantize(const uint8_t* q, const std::vector<float>& scale,
                                            int64_t rows, int64_t cols) {
    std::vector<float> w(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        w[r * cols + c] = static_cast<float>(static_cast<int8_t>(q[r * cols + c])) * scale[r];
    return w;
  }

  // An AWQ matrix (BASE.qweight, .qzeros, .scales; `rows` = out features)
  // as int4w rows, or dequantized to F16 to write.
  void awq_matrix(const std::string& name, const std::string& base, int64_t rows, int64_t cols,
                  int64_t permute_heads) {
    const int64_t g = awq_group_;
    Int4wRows r = awq_rows(base, rows, cols);
    if (permute_heads > 0) {  // whole rows of codes, scales and zero points
      r.q = permute_rows(r.q, rows, permute_heads);
      r.zeros = permute_rows(r.zeros, rows, permute_heads);
      r.scales = permute_rows(r.scales, rows, permute_heads);
    }
    if (weights_ == HfWeights::dequantized)
      return add_floats(name, TensorType::f16, {rows, cols}, int4w_dequantize(r));
    add(name, TensorType::i4, {rows, cols}, own(std::move(r.q)));
    add(name + kBlockScaleSuffix, TensorType::f16, {rows, cols / g}, own(r.scales));
    add(name + kZeroPointSuffix, TensorType::u8, {rows, cols / g}, own(std::move(r.zeros)));
  }

  // An AWQ matrix's parts, checked and repacked into int4w rows.
  Int4wRows awq_rows(const std::string& base, int64_t rows, int64_t cols) {
    const int64_t g = awq_group_;
    if (rows % 8 || cols % g)
      throw Error("AWQ tensor '" + base + ".qweight': " + std::to_string(cols) + " x " +
                  std::to_string(rows) + " is not whole words of 8 columns and groups of " +
                  std::to_string(g));
    auto words = [&](const std::string& n, std::vector<int64_t> shape) {
      const SafeTensor& t = take_raw(n, shape, StDtype::i32);
      std::vector<int32_t> v(static_cast<size_t>(t.elements()));
      std::memcpy(v.data(), t.data, t.nbytes);
      return v;
    };
    AwqWeights a{cols,
                 rows,
                 g,
                 words(base + ".qweight", {cols, rows / 8}),
                 words(base + ".qzeros", {cols / g, rows / 8}),
                 {}};
    const SafeTensor& s = take_raw(base + ".scales", {cols / g, rows}, StDtype::f16);
    a.scales.resize(static_cast<size_t>(s.elements()));
    std::memcpy(a.scales.data(), s.data, s.nbytes);
    return awq_to_int4w(a);
  }

  // AWQ experts, each repacked into int4w rows, stacked as the float
  // experts are; dequantized to F16 to write.
  void awq_experts(const std::string& name, const std::string& pattern, int64_t rows,
                   int64_t cols) {
    const int64_t g = awq_group_;
    Int4wRows all{rows * n_expert_, cols, g, {}, {}, {}};
    std::vector<float> floats;
    for (int64_t e = 0; e < n_expert_; ++e) {
      Int4wRows r = awq_rows(expert_name(pattern, e), rows, cols);
      if (weights_ == HfWeights::dequantized) {
        std::vector<float> f = int4w_dequantize(r);
        floats.insert(floats.end(), f.begin(), f.end());
        continue;
      }
      all.q.insert(all.q.end(), r.q.begin(), r.q.end());
      all.scales.insert(all.scales.end(), r.scales.begin(), r.scales.end());
      all.zeros.insert(all.zeros.end(), r.zeros.begin(), r.zeros.end());
    }
    if (weights_ == HfWeights::dequantized)
      return add_floats(name, TensorType::f16, {n_expert_, rows, cols}, floats);
    add(name, TensorType::i4, {n_expert_, rows, cols}, own(std::move(all.q)));
    add(name + kBlockScaleSuffix, TensorType::f16, {n_expert_, rows, cols / g}, own(all.scales));
    add(name + kZeroPointSuffix, TensorType::u8, {n_expert_, rows, cols / g},
        own(std::move(all.zeros)));
  }

  // A tensor of an exact dtype and shape (a quantized checkpoint's parts).
  const SafeTensor& take_raw(const std::string& hf, const std::vector<int64_t>& shape,
                             StDtype dtype) {
    const SafeTensor* t = p_.st.find(hf);
    if (!t) throw Error("Hugging Face folder '" + dir_ + "': missing tensor '" + hf + "'");
    if (t->shape != shape || t->dtype != dtype)
      throw Error("tensor '" + hf + "' in '" + *t->file + "' is " + st_dtype_name(t->dtype) + " " +
                  shape_str(t->shape) + "; config.json '" + config_path_ + "' implies " +
                  st_dtype_name(dtype) + " " + shape_str(shape));
    used_.insert(hf);
    return *t;
  }

  // Norms, biases and the router: F32, as llama.cpp's converter writes them.
  // `shift` is added to every value: Gemma's norms multiply by 1 + w, GGUF
  // stores 1 + w.
  void as_f32(const std::string& name, const std::string& hf, std::vector<int64_t> shape,
              float shift = 0) {
    const SafeTensor& t = take(hf, shape);
    const int64_t n = t.elements();
    std::vector<uint8_t> out(static_cast<size_t>(n) * 4);
    auto* f = reinterpret_cast<float*>(out.data());
    ggml_to_f32(ggml_type_of(t.dtype), t.data, n, f);
    for (int64_t i = 0; i < n; ++i) f[i] += shift;
    add(name, TensorType::f32, shape, own(std::move(out)));
  }

  // Experts as separate matrices, stacked into one [n_expert, rows, cols]:
  // floats, or FP8 / INT8 with their block / row scales stacked alike, or
  // AWQ's int4w (awq_experts).
  // `pattern`: an expert's HF name without ".weight", "{}" its number.
  static std::string expert_name(const std::string& pattern, int64_t e) {
    std::string s = pattern;
    const size_t at = s.find("{}");
    return at == std::string::npos ? s : s.replace(at, 2, std::to_string(e));
  }
  void experts(const std::string& name, const std::string& pattern, int64_t rows, int64_t cols) {
    if (awq_group_ && p_.st.find(expert_name(pattern, 0) + ".qweight"))
      return awq_experts(name, pattern, rows, cols);
    std::vector<uint8_t> out;
    std::vector<float> scales;
    StDtype dtype = StDtype::f32;
    for (int64_t e = 0; e < n_expert_; ++e) {
      const std::string hf = expert_name(pattern, e);
      const SafeTensor& t = take(hf + ".weight", {rows, cols}, true);
      if (e == 0) {
        dtype = t.dtype;
        out.reserve(t.nbytes * static_cast<size_t>(n_expert_));
      } else if (t.dtype != dtype) {
        throw Error("tensor '" + t.name + "' in '" + *t.file + "' is " + st_dtype_name(t.dtype) +
                    " but expert 0's is " + st_dtype_name(dtype));
      }
      if (dtype != StDtype::f8_e4m3 && dtype != StDtype::i8) {
        out.insert(out.end(), t.data, t.data + t.nbytes);
        continue;
      }
      const bool fp8 = dtype == StDtype::f8_e4m3;
      std::vector<float> s = fp8 ? fp8_scales(t) : int8_scales(t);
      if (weights_ == HfWeights::dequantized) {
        std::vector<float> w =
            fp8 ? fp8_dequantize(t.data, s, rows, cols) : int8_dequantize(t.data, s, rows, cols);
        std::vector<uint8_t> b(w.size() * 2);
        ggml_from_f32(TensorType::bf16, w.data(), static_cast<int64_t>(w.size()), b.data());
        out.insert(out.end(), b.begin(), b.end());
      } else {
        out.insert(out.end(), t.data, t.data + t.nbytes);
        scales.insert(scales.end(), s.begin(), s.end());
      }
    }
    if (dtype != StDtype::f8_e4m3 && dtype != StDtype::i8)
      return add(name, ggml_type_of(dtype), {n_expert_, rows, cols}, own(std::move(out)));
    if (weights_ == HfWeights::dequantized)
      return add(name, TensorType::bf16, {n_expert_, rows, cols}, own(std::move(out)));
    if (dtype == StDtype::i8) {
      add(name, TensorType::i8_channel, {n_expert_, rows, cols}, own(std::move(out)));
      return add(name + kBlockScaleSuffix, TensorType::f32, {n_expert_, rows}, own(scales));
    }
    const int64_t b = fp8_block_;
    add(name, TensorType::f8_e4m3, {n_expert_, rows, cols}, own(std::move(out)));
    add(name + kBlockScaleSuffix, TensorType::f32,
        {n_expert_, (rows + b - 1) / b, (cols + b - 1) / b}, own(scales));
  }

  // GPT-OSS's router and experts. gate_up_proj interleaves the two (gate
  // the even rows, up the odd ones, biases likewise); the experts come as
  // MXFP4 blocks and scales (the release) or as floats stored input-major,
  // [experts, in, out] (dequantized folders). Out: ggml's MXFP4 blocks, or
  // float matrices [experts, out, in], as llama.cpp's converter writes them.
  void gpt_oss_experts(const std::string& blk, const std::string& hf) {
    const int64_t e = n_expert_, f = n_ff_, h = n_embd_;
    const std::string x = hf + "mlp.experts.";
    const bool mxfp4 = p_.st.find(x + "gate_up_proj_blocks") != nullptr;
    if (mxfp4 && (h % 32 || f % 32))
      throw Error("MXFP4 experts '" + x + "gate_up_proj_blocks': widths " + std::to_string(h) +
                  " and " + std::to_string(f) + " in config.json '" + config_path_ +
                  "' are not whole blocks of 32");
    as_f32(blk + "ffn_gate_inp.weight", hf + "mlp.router.weight", {e, h});
    as_f32(blk + "ffn_gate_inp.bias", hf + "mlp.router.bias", {e});
    const SafeTensor& b = take(x + "gate_up_proj_bias", {e, 2 * f});
    std::vector<float> both(static_cast<size_t>(b.elements())), half(static_cast<size_t>(e * f));
    ggml_to_f32(ggml_type_of(b.dtype), b.data, b.elements(), both.data());
    for (int64_t parity = 0; parity < 2; ++parity) {
      for (int64_t i = 0; i < e * f; ++i) half[i] = both[2 * i + parity];
      add_floats(blk + (parity ? "ffn_up_exps.bias" : "ffn_gate_exps.bias"), TensorType::f32,
                 {e, f}, half);
    }
    as_f32(blk + "ffn_down_exps.bias", x + "down_proj_bias", {e, h});
    if (mxfp4) {
      mxfp4_experts(blk + "ffn_gate_exps.weight", x + "gate_up_proj", 2 * f, h, 2, 0);
      mxfp4_experts(blk + "ffn_up_exps.weight", x + "gate_up_proj", 2 * f, h, 2, 1);
      mxfp4_experts(blk + "ffn_down_exps.weight", x + "down_proj", h, f, 1, 0);
      return;
    }
    const SafeTensor& gu = take(x + "gate_up_proj", {e, h, 2 * f});
    add(blk + "ffn_gate_exps.weight", ggml_type_of(gu.dtype), {e, f, h},
        own(transpose_experts(gu, 2, 0)));
    add(blk + "ffn_up_exps.weight", ggml_type_of(gu.dtype), {e, f, h},
        own(transpose_experts(gu, 2, 1)));
    const SafeTensor& d = take(x + "down_proj", {e, f, h});
    add(blk + "ffn_down_exps.weight", ggml_type_of(d.dtype), {e, h, f},
        own(transpose_experts(d, 1, 0)));
  }

  // [E, A, B] -> [E, B / stride, A]: out[e][r][a] = in[e][a][r * stride + offset].
  static std::vector<uint8_t> transpose_experts(const SafeTensor& t, int64_t stride,
                                                int64_t offset) {
    const int64_t n_e = t.shape[0], a = t.shape[1], b = t.shape[2], rows = b / stride;
    const size_t es = t.nbytes / static_cast<size_t>(t.elements());
    std::vector<uint8_t> out(static_cast<size_t>(n_e * rows * a) * es);
    for (int64_t e = 0; e < n_e; ++e)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < a; ++i)
          std::memcpy(&out[static_cast<size_t>((e * rows + r) * a + i) * es],
                      &t.data[static_cast<size_t>((e * a + i) * b + r * stride + offset) * es], es);
    return out;
  }

  // HF's MXFP4 (BASE_blocks [E, hf_rows, k / 32, 16], element 2j in the low
  // nibble of byte j and 2j + 1 in the high one; BASE_scales [E, hf_rows,
  // k / 32], e8m0) to ggml's block_mxfp4 (the scale byte, then element j
  // in the low nibble of byte j and j + 16 in the high one). ggml row r is
  // HF row r * stride + offset.
  void mxfp4_experts(const std::string& name, const std::string& base, int64_t hf_rows, int64_t k,
                     int64_t stride, int64_t offset) {
    const int64_t e = n_expert_, nb = k / 32, rows = hf_rows / stride;
    const SafeTensor& blocks = take_raw(base + "_blocks", {e, hf_rows, nb, 16}, StDtype::u8);
    const SafeTensor& scales = take_raw(base + "_scales", {e, hf_rows, nb}, StDtype::u8);
    std::vector<uint8_t> out(static_cast<size_t>(e * rows * nb) * 17);
    uint8_t* o = out.data();
    for (int64_t x = 0; x < e; ++x)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t hr = x * hf_rows + r * stride + offset;
        for (int64_t j = 0; j < nb; ++j, o += 17) {
          const uint8_t* in = blocks.data + (hr * nb + j) * 16;
          auto code = [&](int i) { return (in[i / 2] >> (4 * (i % 2))) & 15; };
          o[0] = scales.data[hr * nb + j];
          for (int i = 0; i < 16; ++i) o[1 + i] = static_cast<uint8_t>(code(i) | code(i + 16) << 4);
        }
      }
    add(name, TensorType::mxfp4, {e, rows, k}, own(std::move(out)));
  }

  // The architecture's tensors (ArchDesc::tensor_list), each as its HF form says.
  void tensors() {
    ModelConfig c;
    c.arch = arch_;
    apply_arch_features(*desc_, c);
    c.n_embd = n_embd_;
    c.n_layer = n_layer_;
    c.n_head = n_head_;
    c.n_head_kv = n_head_kv_;
    c.head_dim = head_dim_;
    c.n_ff = c.n_ff_exp = n_ff_;
    c.n_expert = c.n_router = n_expert_;
    c.n_vocab = n_vocab_;
    c.tied_embeddings = tied_;
    for (const ArchTensor& t : desc_->tensor_list(c)) {
      const std::string layer =
          t.layer < 0 ? "" : prefix_ + "layers." + std::to_string(t.layer) + ".";
      const std::vector<int64_t> hf_shape(t.shape.rbegin(), t.shape.rend());
      switch (t.form) {
        case HfForm::with_router:
        case HfForm::from_config: continue;
        case HfForm::gpt_oss_moe:
          gpt_oss_experts("blk." + std::to_string(t.layer) + ".", layer);
          continue;
        case HfForm::experts: experts(t.name, prefix_ + t.hf, hf_shape[1], hf_shape[2]); continue;
        case HfForm::plain: break;
      }
      const std::string hf = prefix_ + t.hf;
      switch (t.role) {
        case TensorRole::norm: as_f32(t.name, hf, hf_shape, desc_->hf_norm_shift); break;
        case TensorRole::bias:
        case TensorRole::router: as_f32(t.name, hf, hf_shape); break;
        case TensorRole::token_embd: matrix(t.name, hf, hf_shape[0], hf_shape[1], 0, false); break;
        case TensorRole::output: matrix(t.name, head_, hf_shape[0], hf_shape[1]); break;
        default: {
          // llama's rope pairs (2i, 2i+1): HF's q/k rows are in NEOX order.
          const int64_t permute = desc_->rope_neox               ? 0
                                  : t.role == TensorRole::attn_q ? n_head_
                                  : t.role == TensorRole::attn_k ? n_head_kv_
                                                                 : 0;
          matrix(t.name, hf, hf_shape[0], hf_shape[1], permute);
        }
      }
    }
    // A tensor the translation did not take would be silently ignored by
    // the forward (a bias, a norm): refuse instead. Old checkpoints carry
    // rotary tables the forward recomputes.
    for (const SafeTensor* t : p_.st.tensors()) {
      const std::string& n = t->name;
      if (used_.count(n) || n.find("rotary_emb.inv_freq") != std::string::npos) continue;
      if (std::any_of(not_read_.begin(), not_read_.end(),
                      [&](const std::string& p) { return n.compare(0, p.size(), p) == 0; }))
        continue;
      throw Error("tensor '" + n + "' in '" + *t->file + "' has no place in a " + arch_ +
                  " model as config.json '" + config_path_ + "' describes it");
    }
  }

  std::string dir_, config_path_;
  HfWeights weights_;
  HfCheckpoint::Parts& p_;
  GgufWriter& w_;
  json cfg_;
  const ArchDesc* desc_ = nullptr;
  std::string arch_;
  // Where the text model's tensors are (a multimodal folder nests them), and
  // the prefixes of tensors deliberately not read.
  std::string prefix_ = "model.", head_ = "lm_head.weight";
  std::vector<std::string> not_read_;
  int64_t n_embd_ = 0, n_layer_ = 0, n_head_ = 0, n_head_kv_ = 0, head_dim_ = 0, n_vocab_ = 0;
  int64_t n_ff_ = 0, n_expert_ = 0;
  int64_t fp8_block_ = 0;  // quantization_config's weight_block_size; 0: no FP8
  int64_t awq_group_ = 0;  // AWQ's group_size; 0: no AWQ
  bool int8_ = false;      // compressed-tensors int8 w8a8
  bool tied_ = false;
  std::set<std::string> used_;
};

}  // namespace

std::shared_ptr<const HfCheckpoint> HfCheckpoint::open(const std::string& dir, HfWeights weights) {
  auto ck = std::shared_ptr<HfCheckpoint>(new HfCheckpoint());
  ck->parts_ = std::make_shared<Parts>(Parts{SafetensorsCheckpoint::open(dir), {}, {}});
  ck->writer_ = std::make_unique<GgufWriter>();
  try {
    Translator(dir, weights, *ck->parts_, *ck->writer_).run();
  } catch (const json::exception& e) {  // a value of the wrong JSON type
    throw Error("config.json '" + (fs::path(dir) / "config.json").string() + "': " + e.what());
  }
  return ck;
}

GgufFile HfCheckpoint::open_file(std::shared_ptr<const HfCheckpoint> ck) {
  const Parts& parts = *ck->parts_;
  return GgufFile::open_header(
      ck->gguf().header(), parts.st.dir(),
      [&parts](const GgufTensor& t) { return parts.data.at(t.name); }, ck);
}

bool is_hf_checkpoint(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec);
}

GgufFile open_model_file(const std::string& path, HfWeights weights) {
  if (is_hf_checkpoint(path)) return HfCheckpoint::open_file(HfCheckpoint::open(path, weights));
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw Error("'" + path +
                "' is a directory but not a Hugging Face folder (it has no config.json)");
  return GgufFile::open(path);
}

}  // namespace kiln
