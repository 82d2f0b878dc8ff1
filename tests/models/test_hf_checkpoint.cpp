// Hugging Face folders read as GGUF (models/hf_checkpoint.h): the
// translation checked tensor by tensor on a tiny hand-built llama (names,
// shapes, types, llama's q/k rows re-paired, norms widened to F32, tied
// embeddings), every bad folder refused with a message naming the file and
// the tensor or key, and mutated JSON files (config, tokenizer, tokenizer
// config, shard index) that open or fail with kiln::Error only. Whole
// models against their GGUF: models/hf_parity.py.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "ir/dtype.h"
#include "ir/error.h"
#include "models/gguf_writer.h"
#include "models/hf_checkpoint.h"
#include "models/model_config.h"
#include "support/sentencepiece_bytes.h"

using namespace kiln;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct StTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

std::string st_file(const std::vector<StTensor>& ts) {
  json h = json::object();
  std::string data;
  for (const StTensor& t : ts) {
    h[t.name] = {{"dtype", t.dtype},
                 {"shape", t.shape},
                 {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = h.dump();
  uint64_t n = text.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + text + data;
}

// n f32 values v(i) as F32, F16 or BF16 bytes.
template <class F>
std::string values(const std::string& dtype, int64_t n, F v) {
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    float x = v(i);
    if (dtype == "F32") {
      out.append(reinterpret_cast<const char*>(&x), 4);
    } else {
      uint16_t h = dtype == "F16" ? f32_to_f16_bits(x) : f32_to_bf16_bits(x);
      out.append(reinterpret_cast<const char*>(&h), 2);
    }
  }
  return out;
}

// A 1-layer llama: hidden 8, 2 heads of 4, 1 KV head, ffn 16, vocab 6.
// Each matrix row r holds the value r (f16 is exact there), norms are BF16.
struct TinyFolder {
  fs::path dir = fs::temp_directory_path() / ("kiln-test-hf-folder-" + std::to_string(getpid()));
  json config = {{"model_type", "llama"},    {"hidden_size", 8},
                 {"num_hidden_layers", 1},   {"num_attention_heads", 2},
                 {"num_key_value_heads", 1}, {"intermediate_size", 16},
                 {"vocab_size", 6},          {"rms_norm_eps", 1e-6},
                 {"rope_theta", 10000.0},    {"tie_word_embeddings", true},
                 {"bos_token_id", 4},        {"eos_token_id", 5}};
  json tokenizer = {{"added_tokens",
                     {{{"id", 4}, {"content", "<s>"}, {"special", true}},
                      {{"id", 5}, {"content", "</s>"}, {"special", true}}}},
                    {"pre_tokenizer", {{"type", "ByteLevel"}, {"use_regex", true}}},
                    {"model",
                     {{"type", "BPE"},
                      {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}}},
                      {"merges", {"a b"}}}}};
  std::vector<StTensor> tensors;
  std::map<std::string, std::string> files;  // more files of the folder, by name

  TinyFolder() {
    auto rows = [](const std::string& name, int64_t r, int64_t c) {
      return StTensor{name, "F16", {r, c}, values("F16", r * c, [c](int64_t i) {
                        return static_cast<float>(i / c);
                      })};
    };
    auto norm = [](const std::string& name, int64_t n) {
      return StTensor{name, "BF16", {n}, values("BF16", n, [](int64_t i) {
                        return 1.0f + 0.5f * static_cast<float>(i);
                      })};
    };
    const std::string l = "model.layers.0.";
    tensors = {
        rows("model.embed_tokens.weight", 6, 8),   norm("model.norm.weight", 8),
        norm(l + "input_layernorm.weight", 8),     rows(l + "self_attn.q_proj.weight", 8, 8),
        rows(l + "self_attn.k_proj.weight", 4, 8), rows(l + "self_attn.v_proj.weight", 4, 8),
        rows(l + "self_attn.o_proj.weight", 8, 8), norm(l + "post_attention_layernorm.weight", 8),
        rows(l + "mlp.gate_proj.weight", 16, 8),   rows(l + "mlp.up_proj.weight", 16, 8),
        rows(l + "mlp.down_proj.weight", 8, 16)};
  }
  StTensor& tensor(const std::string& name) {
    for (StTensor& t : tensors)
      if (t.name == name) return t;
    throw std::logic_error(name);
  }
  void write() const {
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << config.dump();
    std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
    std::ofstream(dir / "model.safetensors", std::ios::binary) << st_file(tensors);
    for (const auto& [name, text] : files) std::ofstream(dir / name, std::ios::binary) << text;
  }
  std::string error() const {
    write();
    try {
      HfCheckpoint::open_file(HfCheckpoint::open(dir.string()));
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }
  ~TinyFolder() { fs::remove_all(dir); }
};

float f16_at(const GgufTensor& t, int64_t i) {
  uint16_t h;
  std::memcpy(&h, t.data + 2 * i, 2);
  return f16_bits_to_f32(h);
}

}  // namespace

TEST_CASE("hf: a llama folder translates to GGUF names, shapes and types", "[models][hf]") {
  TinyFolder t;
  t.write();
  CHECK(is_hf_checkpoint(t.dir.string()));
  CHECK_FALSE(is_hf_checkpoint((t.dir / "config.json").string()));
  GgufFile f = open_model_file(t.dir.string());
  CHECK(f.get_string("general.architecture") == "llama");
  CHECK(f.get_u32("llama.embedding_length") == 8);
  CHECK(f.get_u32("llama.attention.head_count_kv") == 1);
  CHECK(f.get_f32("llama.attention.layer_norm_rms_epsilon") == Approx(1e-6));
  CHECK(f.get_string("tokenizer.ggml.model") == "gpt2");
  CHECK(f.get_u32("tokenizer.ggml.bos_token_id") == 4);
  CHECK(f.get_string_array("tokenizer.ggml.tokens").size() == 6);
  CHECK(f.find_tensor("output.weight") == nullptr);  // tied
  const GgufTensor& q = f.tensor("blk.0.attn_q.weight");
  CHECK(q.type == TensorType::f16);
  CHECK(q.shape == std::vector<int64_t>{8, 8});
  // GGUF row 2i + j of a head is HF row j * d/2 + i (d = 4): 0 2 1 3, 4 6 5 7.
  const int want_q[] = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int r = 0; r < 8; ++r) CHECK(f16_at(q, r * 8) == want_q[r]);
  const GgufTensor& k = f.tensor("blk.0.attn_k.weight");
  const int want_k[] = {0, 2, 1, 3};
  for (int r = 0; r < 4; ++r) CHECK(f16_at(k, r * 8 + 7) == want_k[r]);
  // v is not permuted, and lies in place in the mapped file.
  const GgufTensor& v = f.tensor("blk.0.attn_v.weight");
  for (int r = 0; r < 4; ++r) CHECK(f16_at(v, r * 8) == r);
  CHECK(f.tensor("blk.0.ffn_down.weight").shape == std::vector<int64_t>{16, 8});
  const GgufTensor& n = f.tensor("blk.0.attn_norm.weight");
  CHECK(n.type == TensorType::f32);
  float n3;
  std::memcpy(&n3, n.data + 12, 4);
  CHECK(n3 == 2.5f);
  CHECK(f.get_string("tokenizer.ggml.pre") == "gpt-2");
}

TEST_CASE("hf: Llama 3.1's rope scaling becomes rope_freqs.weight, which the config reads",
          "[models][hf]") {
  TinyFolder t;
  // head_dim 4, base 10000: pair 0's wavelength 2 pi is short (kept), pair
  // 1's 200 pi long (divided by the factor).
  t.config["rope_scaling"] = {{"rope_type", "llama3"},
                              {"factor", 8.0},
                              {"low_freq_factor", 1.0},
                              {"high_freq_factor", 4.0},
                              {"original_max_position_embeddings", 64}};
  t.write();
  GgufFile f = open_model_file(t.dir.string());
  CHECK(ModelConfig::from_gguf(f).rope_scaling.freq_factors == std::vector<float>{1, 8});
  // A GGUF whose rope_freqs does not fit the rotated pairs is refused.
  GgufWriter w;
  for (const auto& [key, v] : f.metadata()) w.add(key, GgufWriter::copy_of(v));
  for (const GgufTensor& x : f.tensors())
    if (x.name != "rope_freqs.weight")
      w.add_tensor(x.name, x.type, x.shape,
                   std::string_view(reinterpret_cast<const char*>(x.data), x.nbytes));
  w.add_tensor("rope_freqs.weight", TensorType::f32, {3}, std::string(12, '\0'));
  CHECK_THROWS_WITH(ModelConfig::from_gguf(GgufFile::open_memory(w.bytes(), "r.gguf")),
                    Catch::Contains("'rope_freqs.weight' must be F32 with 2 values") &&
                        Catch::Contains("has F32 with 3"));
}

TEST_CASE("hf: tokenizer.json's pre-tokenizer regexes name the GGUF pre-tokenizer",
          "[models][hf]") {
  const std::string qwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  std::string llama3 = qwen2;
  llama3.replace(llama3.find(R"(\p{N}|)"), 6, R"(\p{N}{1,3}|)");
  for (const auto& [regex, name] : {std::pair{qwen2, "qwen2"}, std::pair{llama3, "llama-bpe"}}) {
    TinyFolder t;
    t.tokenizer["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", regex}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
    t.write();
    GgufFile f = open_model_file(t.dir.string());
    CHECK(f.get_string("tokenizer.ggml.pre") == name);
  }
}

TEST_CASE("hf: bad folders are refused naming the file and the tensor or key",
          "[models][hf][error]") {
  {
    TinyFolder t;
    t.config["model_type"] = "gpt_neox";
    CHECK_THAT(t.error(), Catch::Contains("model_type 'gpt_neox' is not supported"));
  }
  {
    TinyFolder t;
    t.config.erase("hidden_size");
    CHECK_THAT(t.error(),
               Catch::Contains("config.json") && Catch::Contains("missing integer 'hidden_size'"));
  }
  {
    TinyFolder t;
    t.config["hidden_size"] = "eight";
    CHECK_THAT(t.error(), Catch::Contains("'hidden_size' is not a non-negative integer"));
  }
  {
    TinyFolder t;  // the config's KV heads disagree with k_proj
    t.config["num_key_value_heads"] = 2;
    CHECK_THAT(t.error(), Catch::Contains("tensor 'model.layers.0.self_attn.k_proj.weight'") &&
                              Catch::Contains("model.safetensors") &&
                              Catch::Contains("has shape [4,8]") &&
                              Catch::Contains("implies [8,8]"));
  }
  {
    TinyFolder t;
    t.config["num_key_value_heads"] = 3;
    CHECK_THAT(t.error(), Catch::Contains("2 attention heads cannot share 3 KV heads"));
  }
  {
    TinyFolder t;
    StTensor& w = t.tensor("model.layers.0.mlp.up_proj.weight");
    w.dtype = "F64";
    w.bytes = std::string(16 * 8 * 8, '\0');
    CHECK_THAT(t.error(), Catch::Contains("tensor 'model.layers.0.mlp.up_proj.weight'") &&
                              Catch::Contains("has dtype F64"));
  }
  {
    TinyFolder t;
    t.tensors.pop_back();
    CHECK_THAT(t.error(), Catch::Contains("missing tensor 'model.layers.0.mlp.down_proj.weight'"));
  }
  {
    TinyFolder t;  // a tensor the forward would ignore
    t.tensors.push_back(
        {"model.layers.0.self_attn.q_proj.bias", "F32", {8}, std::string(32, '\0')});
    CHECK_THAT(t.error(), Catch::Contains("tensor 'model.layers.0.self_attn.q_proj.bias'") &&
                              Catch::Contains("has no place in a llama model"));
  }
  {
    TinyFolder t;
    t.config["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 8.0}};
    CHECK_THAT(t.error(), Catch::Contains("rope_scaling type 'longrope' is not supported"));
  }
  {
    TinyFolder t;  // Gemma 3 layouts Kiln does not run are refused, not run wrongly
    t.config["model_type"] = "gemma3_text";
    t.config["head_dim"] = 4;
    t.config["sliding_window_pattern"] = 4;
    CHECK_THAT(t.error(), Catch::Contains("sliding_window_pattern other than 6"));
    t.config.erase("sliding_window_pattern");
    t.config["layer_types"] = {"full_attention"};
    CHECK_THAT(t.error(), Catch::Contains("layer_types: layer 0 is not where"));
    t.config.erase("layer_types");
    t.config["final_logit_softcapping"] = 30.0;
    CHECK_THAT(t.error(), Catch::Contains("final_logit_softcapping is not supported"));
    t.config.erase("final_logit_softcapping");
    t.config["query_pre_attn_scalar"] = 3;
    CHECK_THAT(t.error(), Catch::Contains("query_pre_attn_scalar 3"));
  }
  {
    TinyFolder t;
    t.tokenizer["model"]["type"] = "Unigram";
    CHECK_THAT(t.error(),
               Catch::Contains("tokenizer.json") && Catch::Contains("model type 'Unigram'"));
  }
  {
    TinyFolder t;
    t.tokenizer["model"]["byte_fallback"] = true;  // with GPT-2's byte-level pre-tokenizer
    CHECK_THAT(t.error(),
               Catch::Contains("SentencePiece-style BPE with a 'ByteLevel' normalizer or "
                               "pre-tokenizer is not supported"));
    t.tokenizer["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xe2\x96\x81"}};
    CHECK_THAT(t.error(), Catch::Contains("Metaspace pre-tokenizer that splits words"));
    t.tokenizer["pre_tokenizer"] = nullptr;
    CHECK_THAT(t.error(), Catch::Contains("does not write spaces as U+2581"));
  }
  {
    TinyFolder t;
    t.tokenizer["pre_tokenizer"] = {
        {"type", "Split"}, {"pattern", {{"Regex", "\\w+"}}}, {"behavior", "Isolated"}};
    CHECK_THAT(t.error(), Catch::Contains("no ByteLevel pre-tokenizer"));
    t.tokenizer["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         {t.tokenizer["pre_tokenizer"], {{"type", "ByteLevel"}, {"use_regex", false}}}}};
    CHECK_THAT(t.error(), Catch::Contains("match none Kiln knows") && Catch::Contains("\\w+"));
  }
  {
    TinyFolder t;
    t.write();
    fs::remove(t.dir / "tokenizer.json");
    CHECK_THROWS_WITH(HfCheckpoint::open(t.dir.string()),
                      Catch::Contains("no tokenizer.json or tokenizer.model"));
    // A truncated shard is named.
    std::string bytes = st_file(t.tensors);
    std::ofstream(t.dir / "model.safetensors", std::ios::binary)
        << bytes.substr(0, bytes.size() - 10);
    CHECK_THROWS_WITH(HfCheckpoint::open(t.dir.string()),
                      Catch::Contains("model.safetensors") && Catch::Contains("lie outside"));
  }
}

void make_gpt_oss(TinyFolder& t, bool mxfp4);
float f32_at(const GgufTensor& t, int64_t i);

TEST_CASE("hf: mutated JSON files of a folder open or fail with kiln::Error",
          "[models][hf][fuzz]") {
  const bool gpt_oss = GENERATE(false, true);  // a llama, a GPT-OSS with MXFP4 experts
  TinyFolder t;
  if (gpt_oss) make_gpt_oss(t, true);
  // Every JSON file a folder may have: the tensors in two shards with their
  // index (which takes precedence over model.safetensors), and a
  // tokenizer_config.json with a chat template.
  const std::string shard[2] = {"model-00001-of-00002.safetensors",
                                "model-00002-of-00002.safetensors"};
  const auto half = static_cast<std::ptrdiff_t>(t.tensors.size() / 2);
  json weight_map = json::object();
  for (size_t i = 0; i < t.tensors.size(); ++i)
    weight_map[t.tensors[i].name] = shard[static_cast<std::ptrdiff_t>(i) < half ? 0 : 1];
  t.files[shard[0]] = st_file({t.tensors.begin(), t.tensors.begin() + half});
  t.files[shard[1]] = st_file({t.tensors.begin() + half, t.tensors.end()});
  t.write();
  std::map<std::string, std::string> texts = {
      {"config.json", t.config.dump()},
      {"tokenizer.json", t.tokenizer.dump()},
      {"tokenizer_config.json",
       json{{"chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}"},
            {"add_bos_token", true}}
           .dump()},
      {"model.safetensors.index.json",
       json{{"metadata", {{"total_size", 1000}}}, {"weight_map", weight_map}}.dump()}};
  std::mt19937_64 rng(7);
  for (const auto& [file, text] : texts) {
    int opened = 0, refused = 0;
    for (int iter = 0; iter < 200; ++iter) {
      std::string m = text;
      for (int n = 0; n < 1 + static_cast<int>(rng() % 3); ++n) {
        size_t pos = rng() % m.size();
        switch (rng() % 3) {
          case 0: m[pos] = "0123456789[]{},:\"-.tfn"[rng() % 22]; break;
          case 1: m.erase(pos, 1 + rng() % 6); break;
          default: m.insert(pos, std::string(1, "0\"[{,-"[rng() % 6]));
        }
      }
      for (const auto& [name, original] : texts)
        std::ofstream(t.dir / name) << (name == file ? m : original);
      try {
        HfCheckpoint::open_file(HfCheckpoint::open(t.dir.string()));
        ++opened;
      } catch (const Error&) {
        ++refused;
      }
    }
    INFO(file << ": " << opened << " opened, " << refused << " refused");
    CHECK(opened > 0);
    CHECK(refused > 10);
  }
}

// Block-scaled FP8 (quant_method fp8): the up projection as E4M3 bytes with
// a scale per 16 x 16 block. Kept as it is to run; BF16 values of code x
// scale to write; refused where its form is wrong.
TEST_CASE("hf: FP8 weights keep their bytes and scales, or dequantize to write", "[models][hf]") {
  auto fp8_folder = [](TinyFolder& t) {
    t.config["quantization_config"] = {
        {"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {16, 16}}};
    StTensor& w = t.tensor("model.layers.0.mlp.up_proj.weight");  // [16, 8]: one block
    w.dtype = "F8_E4M3";
    w.bytes.clear();
    for (int i = 0; i < 16 * 8; ++i)
      w.bytes.push_back(static_cast<char>(f32_to_f8e4m3_bits(i % 9 - 4)));
    t.tensors.push_back(
        {w.name + "_scale_inv", "F32", {1, 1}, values("F32", 1, [](int64_t) { return 0.25f; })});
  };
  {
    TinyFolder t;
    fp8_folder(t);
    t.write();
    GgufFile f = open_model_file(t.dir.string());
    const GgufTensor& w = f.tensor("blk.0.ffn_up.weight");
    CHECK(w.type == TensorType::f8_e4m3);
    CHECK(f8e4m3_bits_to_f32(w.data[10]) == 10 % 9 - 4);
    const GgufTensor& s = f.tensor(std::string("blk.0.ffn_up.weight") + kBlockScaleSuffix);
    CHECK(s.type == TensorType::f32);
    CHECK(s.shape == std::vector<int64_t>{1, 1});
    CHECK(f.get_u32(kWeightBlockSizeKey) == 16);
    // No GGUF file holds Kiln's in-memory type.
    CHECK_THROWS_WITH(HfCheckpoint::open(t.dir.string())->gguf().write((t.dir / "x.gguf").string()),
                      Catch::Contains("F8_E4M3, Kiln's in-memory form"));
    GgufFile d = open_model_file(t.dir.string(), HfWeights::dequantized);
    const GgufTensor& wd = d.tensor("blk.0.ffn_up.weight");
    CHECK(wd.type == TensorType::bf16);
    uint16_t h;
    std::memcpy(&h, wd.data + 2 * 10, 2);
    CHECK(bf16_bits_to_f32(h) == 0.25f * (10 % 9 - 4));
    CHECK(d.find_tensor(std::string("blk.0.ffn_up.weight") + kBlockScaleSuffix) == nullptr);
  }
  {
    TinyFolder t;
    fp8_folder(t);
    t.config.erase("quantization_config");
    CHECK_THAT(t.error(), Catch::Contains("'model.layers.0.mlp.up_proj.weight'") &&
                              Catch::Contains("is F8_E4M3 but config.json"));
  }
  {
    TinyFolder t;
    fp8_folder(t);
    t.config["quantization_config"]["weight_block_size"] = {16, 32};
    CHECK_THAT(t.error(), Catch::Contains("weight_block_size must be [B, B]"));
  }
  {
    TinyFolder t;
    fp8_folder(t);
    t.tensors.pop_back();
    CHECK_THAT(t.error(),
               Catch::Contains("missing tensor 'model.layers.0.mlp.up_proj.weight_scale_inv'"));
  }
  {
    TinyFolder t;
    fp8_folder(t);
    t.tensor("model.layers.0.mlp.up_proj.weight").bytes[5] = static_cast<char>(0xFF);
    CHECK_THAT(t.error(), Catch::Contains("holds an FP8 NaN (byte 5)"));
  }
  {
    TinyFolder t;  // the embeddings are gathered, never FP8
    fp8_folder(t);
    StTensor& e = t.tensor("model.embed_tokens.weight");
    e.dtype = "F8_E4M3";
    e.bytes = std::string(6 * 8, '\0');
    CHECK_THAT(t.error(), Catch::Contains("'model.embed_tokens.weight'") &&
                              Catch::Contains("has dtype F8_E4M3"));
  }
  {
    TinyFolder t;
    t.config["quantization_config"] = {{"quant_method", "gptq"}};
    CHECK_THAT(t.error(), Catch::Contains("quant_method 'gptq' is not supported"));
  }
}

// compressed-tensors' w8a8 config: int8 weights per channel, dynamic int8
// activations per token.
json int8_config() {
  const json scheme = {{"num_bits", 8}, {"type", "int"}, {"symmetric", true}};
  json w = scheme, x = scheme;
  w["strategy"] = "channel";
  x["strategy"] = "token";
  x["dynamic"] = true;
  return {{"quant_method", "compressed-tensors"},
          {"config_groups", {{"group_0", {{"weights", w}, {"input_activations", x}}}}}};
}

// The tiny llama as a qwen3_moe: 2 experts of 16 (one used), q/k norms;
// each expert's up projection [16, 8] as FP8 codes with one 16x16 block
// scale (expert e's is e + 1), or as INT8 / AWQ, which no grouped kernel runs.
void make_qwen3moe(TinyFolder& t, const std::string& experts) {
  t.config["model_type"] = "qwen3_moe";
  t.config["head_dim"] = 4;
  t.config["num_experts"] = 2;
  t.config["num_experts_per_tok"] = 1;
  t.config["moe_intermediate_size"] = 16;
  const std::string l = "model.layers.0.";
  std::vector<StTensor> kept;
  for (StTensor& x : t.tensors)
    if (x.name.find(".mlp.") == std::string::npos) kept.push_back(x);
  t.tensors = kept;
  auto f16 = [](const std::string& name, int64_t r, int64_t c, float v) {
    return StTensor{name, "F16", {r, c}, values("F16", r * c, [v](int64_t) { return v; })};
  };
  t.tensors.push_back(f16(l + "self_attn.q_norm.weight", 1, 4, 1));
  t.tensors.back().shape = {4};
  t.tensors.push_back(f16(l + "self_attn.k_norm.weight", 1, 4, 1));
  t.tensors.back().shape = {4};
  t.tensors.push_back(f16(l + "mlp.gate.weight", 2, 8, 0.5f));
  for (int e = 0; e < 2; ++e) {
    const std::string x = l + "mlp.experts." + std::to_string(e) + ".";
    t.tensors.push_back(f16(x + "gate_proj.weight", 16, 8, 1));
    t.tensors.push_back(f16(x + "down_proj.weight", 8, 16, 1));
    StTensor up = f16(x + "up_proj.weight", 16, 8, 1);
    if (experts == "fp8") {
      up.dtype = "F8_E4M3";
      up.bytes.clear();
      for (int i = 0; i < 16 * 8; ++i)
        up.bytes.push_back(static_cast<char>(f32_to_f8e4m3_bits(static_cast<float>(i % 5 + e))));
      t.tensors.push_back({up.name + "_scale_inv", "F32", {1, 1}, values("F32", 1, [e](int64_t) {
                             return e + 1.0f;
                           })});
      t.config["quantization_config"] = {
          {"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {16, 16}}};
    } else if (experts == "int8") {
      up.dtype = "I8";
      up.bytes = std::string(16 * 8, '\1');
      t.tensors.push_back(
          {up.name + "_scale", "F32", {16, 1}, values("F32", 16, [](int64_t) { return 1.0f; })});
    } else if (experts == "awq") {
      up = {x + "up_proj.qweight", "I32", {8, 2}, std::string(8 * 2 * 4, '\0')};
      t.config["quantization_config"] = {{"quant_method", "awq"},
                                         {"bits", 4},
                                         {"group_size", 32},
                                         {"zero_point", true},
                                         {"version", "gemm"}};
    }
    t.tensors.push_back(up);
  }
}

TEST_CASE("hf: FP8 experts stack their codes and their block scales", "[models][hf]") {
  TinyFolder t;
  make_qwen3moe(t, "fp8");
  t.write();
  GgufFile f = open_model_file(t.dir.string());
  const GgufTensor& w = f.tensor("blk.0.ffn_up_exps.weight");
  CHECK(w.type == TensorType::f8_e4m3);
  REQUIRE(w.shape == std::vector<int64_t>{8, 16, 2});
  CHECK(f8e4m3_bits_to_f32(w.data[16 * 8 + 3]) == 3 % 5 + 1);  // expert 1
  const GgufTensor& s = f.tensor(std::string("blk.0.ffn_up_exps.weight") + kBlockScaleSuffix);
  REQUIRE(s.shape == std::vector<int64_t>{1, 1, 2});
  CHECK(f32_at(s, 0) == 1.0f);
  CHECK(f32_at(s, 1) == 2.0f);
  CHECK(f.tensor("blk.0.ffn_gate_exps.weight").type == TensorType::f16);
  // Written for llama.cpp: code x scale, as BF16.
  GgufFile d = open_model_file(t.dir.string(), HfWeights::dequantized);
  const GgufTensor& wd = d.tensor("blk.0.ffn_up_exps.weight");
  CHECK(wd.type == TensorType::bf16);
  uint16_t h;
  std::memcpy(&h, wd.data + 2 * (16 * 8 + 3), 2);
  CHECK(bf16_bits_to_f32(h) == 2.0f * (3 % 5 + 1));
}

TEST_CASE("hf: INT8 experts stack their codes and row scales; AWQ experts are checked",
          "[models][hf]") {
  {
    TinyFolder t;
    make_qwen3moe(t, "int8");
    t.config["quantization_config"] = int8_config();
    t.write();
    GgufFile f = open_model_file(t.dir.string());
    const GgufTensor& q = f.tensor("blk.0.ffn_up_exps.weight");
    CHECK(q.type == TensorType::i8_channel);
    CHECK(q.shape == std::vector<int64_t>{8, 16, 2});
    const GgufTensor& s = f.tensor(std::string("blk.0.ffn_up_exps.weight") + kBlockScaleSuffix);
    CHECK(s.shape == std::vector<int64_t>{16, 2});
  }
  {
    TinyFolder t;  // the experts' 8 inputs are not a whole AWQ group
    make_qwen3moe(t, "awq");
    CHECK_THAT(t.error(), Catch::Contains("AWQ tensor 'model.layers.0.mlp.experts.0.up_proj") &&
                              Catch::Contains("groups of 32"));
  }
}

TEST_CASE("hf: AWQ folders Kiln cannot run as they are are refused", "[models][hf][error]") {
  auto awq = [](TinyFolder& t, json q) {
    t.config["quantization_config"] = q;
    StTensor& w = t.tensor("model.layers.0.mlp.up_proj.weight");  // [16 out, 8 in]
    w.name = "model.layers.0.mlp.up_proj.qweight";
    w.dtype = "I32";
    w.shape = {8, 2};
    w.bytes = std::string(8 * 2 * 4, '\0');
  };
  const json ok = {{"quant_method", "awq"},
                   {"bits", 4},
                   {"group_size", 32},
                   {"zero_point", true},
                   {"version", "gemm"}};
  {
    TinyFolder t;
    json q = ok;
    q["bits"] = 8;
    awq(t, q);
    CHECK_THAT(t.error(), Catch::Contains("AWQ with bits 4, zero_point true and version gemm"));
  }
  {
    TinyFolder t;
    json q = ok;
    q["version"] = "gemv";
    awq(t, q);
    CHECK_THAT(t.error(), Catch::Contains("version gemm"));
  }
  {
    TinyFolder t;
    json q = ok;
    q["group_size"] = 96;
    awq(t, q);
    CHECK_THAT(t.error(), Catch::Contains("group_size 96 is not supported"));
  }
  {
    TinyFolder t;  // 8 inputs are not a whole group of 32
    awq(t, ok);
    CHECK_THAT(t.error(), Catch::Contains("AWQ tensor 'model.layers.0.mlp.up_proj.qweight'") &&
                              Catch::Contains("groups of 32"));
  }
}

// compressed-tensors INT8 (w8a8): the up projection as int8 codes with a
// scale per row; kept to run, BF16 to write, refused where the form is off.
TEST_CASE("hf: INT8 weights keep their codes and channel scales", "[models][hf]") {
  auto int8_folder = [](TinyFolder& t) {
    t.config["quantization_config"] = int8_config();
    StTensor& up = t.tensor("model.layers.0.mlp.up_proj.weight");  // [16, 8]
    up.dtype = "I8";
    up.bytes.clear();
    for (int i = 0; i < 16 * 8; ++i) up.bytes.push_back(static_cast<char>(i % 11 - 5));
    t.tensors.push_back({up.name + "_scale", "BF16", {16, 1}, values("BF16", 16, [](int64_t r) {
                           return 0.5f * static_cast<float>(r + 1);
                         })});
  };
  {
    TinyFolder t;
    int8_folder(t);
    t.write();
    GgufFile f = open_model_file(t.dir.string());
    const GgufTensor& w = f.tensor("blk.0.ffn_up.weight");
    CHECK(w.type == TensorType::i8_channel);
    CHECK(static_cast<int8_t>(w.data[20]) == 20 % 11 - 5);
    const GgufTensor& s = f.tensor(std::string("blk.0.ffn_up.weight") + kBlockScaleSuffix);
    CHECK(s.shape == std::vector<int64_t>{16});
    float s2;
    std::memcpy(&s2, s.data + 8, 4);
    CHECK(s2 == 1.5f);
    GgufFile d = open_model_file(t.dir.string(), HfWeights::dequantized);
    const GgufTensor& wd = d.tensor("blk.0.ffn_up.weight");
    uint16_t h;
    std::memcpy(&h, wd.data + 2 * 20, 2);  // row 2, scale 1.5
    CHECK(bf16_bits_to_f32(h) == 1.5f * (20 % 11 - 5));
  }
  {
    TinyFolder t;
    int8_folder(t);
    t.config["quantization_config"]["config_groups"]["group_0"]["input_activations"]["dynamic"] =
        false;
    CHECK_THAT(t.error(), Catch::Contains("compressed-tensors int8 w8a8"));
  }
  {
    TinyFolder t;
    int8_folder(t);
    t.config.erase("quantization_config");
    CHECK_THAT(t.error(), Catch::Contains("is I8 but config.json"));
  }
  {
    TinyFolder t;
    int8_folder(t);
    t.tensors.back().shape = {8, 2};
    CHECK_THAT(t.error(), Catch::Contains("'model.layers.0.mlp.up_proj.weight_scale'") &&
                              Catch::Contains("implies [16,1]"));
  }
}

// A 1-layer GPT-OSS: hidden 32, 2 heads of 16, 1 KV head, 2 experts of
// 32, one used. Its experts as the release holds them (MXFP4 blocks and
// scales, gate and up rows interleaved), or as floats stored input-major.
// MXFP4 code k of HF row hr is mx_code(hr, k) (k and k + 16 differ, so the
// nibble order shows), its scale byte the expert's and row's number.
int mx_code(int64_t hr, int k) { return (k + (k >= 16 ? 7 : 0) + static_cast<int>(hr)) % 16; }

void make_gpt_oss(TinyFolder& t, bool mxfp4) {
  t.config = {{"model_type", "gpt_oss"},
              {"hidden_size", 32},
              {"num_hidden_layers", 1},
              {"num_attention_heads", 2},
              {"num_key_value_heads", 1},
              {"head_dim", 16},
              {"intermediate_size", 32},
              {"num_local_experts", 2},
              {"num_experts_per_tok", 1},
              {"vocab_size", 6},
              {"sliding_window", 8},
              {"layer_types", {"sliding_attention"}},
              {"swiglu_limit", 7.0},
              {"attention_bias", true},
              {"rope_theta", 150000.0},
              {"rope_scaling",
               {{"rope_type", "yarn"},
                {"factor", 32.0},
                {"beta_fast", 32.0},
                {"beta_slow", 1.0},
                {"original_max_position_embeddings", 4096},
                {"truncate", false}}},
              {"tie_word_embeddings", false}};
  auto f32 = [](const std::string& name, std::vector<int64_t> shape, auto v) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return StTensor{name, "F32", shape, values("F32", n, v)};
  };
  auto ones = [](int64_t) { return 1.0f; };
  auto index = [](int64_t i) { return static_cast<float>(i); };
  const std::string l = "model.layers.0.", x = l + "mlp.experts.";
  t.tensors = {f32("model.embed_tokens.weight", {6, 32}, index),
               f32("model.norm.weight", {32}, ones),
               f32("lm_head.weight", {6, 32}, index),
               f32(l + "input_layernorm.weight", {32}, ones),
               f32(l + "post_attention_layernorm.weight", {32}, ones),
               f32(l + "self_attn.q_proj.weight", {32, 32}, index),
               f32(l + "self_attn.q_proj.bias", {32}, index),
               f32(l + "self_attn.k_proj.weight", {16, 32}, index),
               f32(l + "self_attn.k_proj.bias", {16}, index),
               f32(l + "self_attn.v_proj.weight", {16, 32}, index),
               f32(l + "self_attn.v_proj.bias", {16}, index),
               f32(l + "self_attn.o_proj.weight", {32, 32}, index),
               f32(l + "self_attn.o_proj.bias", {32}, index),
               f32(l + "self_attn.sinks", {2}, index),
               f32(l + "mlp.router.weight", {2, 32}, index),
               f32(l + "mlp.router.bias", {2}, index),
               f32(x + "gate_up_proj_bias", {2, 64}, index),
               f32(x + "down_proj_bias", {2, 32}, index)};
  if (!mxfp4) {
    t.tensors.push_back(f32(x + "gate_up_proj", {2, 32, 64}, index));
    t.tensors.push_back(f32(x + "down_proj", {2, 32, 32}, index));
    return;
  }
  t.config["quantization_config"] = {{"quant_method", "mxfp4"}};
  for (auto [proj, rows] :
       {std::pair<std::string, int64_t>{"gate_up_proj", 64}, {"down_proj", 32}}) {
    std::string blocks, scales;
    for (int64_t hr = 0; hr < 2 * rows; ++hr) {  // rows of both experts
      scales += static_cast<char>(hr);
      for (int i = 0; i < 16; ++i)
        blocks += static_cast<char>(mx_code(hr, 2 * i) | mx_code(hr, 2 * i + 1) << 4);
    }
    t.tensors.push_back({x + proj + "_blocks", "U8", {2, rows, 1, 16}, blocks});
    t.tensors.push_back({x + proj + "_scales", "U8", {2, rows, 1}, scales});
  }
}

float f32_at(const GgufTensor& t, int64_t i) {
  float v;
  std::memcpy(&v, t.data + 4 * i, 4);
  return v;
}

TEST_CASE("hf: GPT-OSS's MXFP4 experts become ggml's blocks, gate and up apart", "[models][hf]") {
  TinyFolder t;
  make_gpt_oss(t, true);
  t.write();
  GgufFile f = open_model_file(t.dir.string());
  CHECK(f.get_string("general.architecture") == "gpt-oss");
  CHECK(f.get_u32("gpt-oss.expert_count") == 2);
  CHECK(f.get_u32("gpt-oss.expert_used_count") == 1);
  CHECK(f.get_u32("gpt-oss.expert_feed_forward_length") == 32);
  CHECK(f.get_u32("gpt-oss.attention.sliding_window") == 8);
  CHECK(f.get_string("gpt-oss.rope.scaling.type") == "yarn");
  // ggml row r of gate (up) is HF row 2r (2r + 1); a block is the scale
  // byte, then element j in the low nibble and j + 16 in the high one.
  for (const auto& [name, parity] : {std::pair<std::string, int>{"gate", 0}, {"up", 1}}) {
    const GgufTensor& w = f.tensor("blk.0.ffn_" + name + "_exps.weight");
    CHECK(w.type == TensorType::mxfp4);
    REQUIRE(w.shape == std::vector<int64_t>{32, 32, 2});
    for (int64_t e = 0; e < 2; ++e)
      for (int64_t r = 0; r < 32; ++r) {
        const int64_t hr = e * 64 + 2 * r + parity;
        const uint8_t* b = w.data + (e * 32 + r) * 17;
        CHECK(b[0] == hr);
        for (int j = 0; j < 16; ++j) CHECK(b[1 + j] == (mx_code(hr, j) | mx_code(hr, j + 16) << 4));
      }
    const GgufTensor& bias = f.tensor("blk.0.ffn_" + name + "_exps.bias");
    CHECK(bias.shape == std::vector<int64_t>{32, 2});
    CHECK(f32_at(bias, 33) == 64 + 2 + parity);  // expert 1, row 1
  }
  const GgufTensor& down = f.tensor("blk.0.ffn_down_exps.weight");
  CHECK(down.shape == std::vector<int64_t>{32, 32, 2});
  CHECK(down.data[17 * 33] == 33);  // expert 1, row 1: HF row 33
  CHECK(f.tensor("blk.0.attn_sinks.weight").type == TensorType::f32);
  CHECK(f.tensor("blk.0.attn_output.bias").shape == std::vector<int64_t>{32});
  CHECK(f.tensor("blk.0.ffn_gate_inp.bias").shape == std::vector<int64_t>{2});
  CHECK(f.find_tensor("blk.0.post_attention_norm.weight") != nullptr);
  CHECK(f.find_tensor("blk.0.ffn_norm.weight") == nullptr);
}

TEST_CASE("hf: GPT-OSS's float experts are split and stored output-major", "[models][hf]") {
  TinyFolder t;
  make_gpt_oss(t, false);
  t.write();
  GgufFile f = open_model_file(t.dir.string());
  // gate_up_proj[e][i][o] holds e * 2048 + i * 64 + o; gate[e][r][i] is
  // gate_up_proj[e][i][2r], up's [2r + 1]; down[e][r][i] is down_proj[e][i][r].
  const GgufTensor& gate = f.tensor("blk.0.ffn_gate_exps.weight");
  const GgufTensor& up = f.tensor("blk.0.ffn_up_exps.weight");
  const GgufTensor& down = f.tensor("blk.0.ffn_down_exps.weight");
  REQUIRE(gate.shape == std::vector<int64_t>{32, 32, 2});
  REQUIRE(down.shape == std::vector<int64_t>{32, 32, 2});
  for (int64_t e : {0, 1})
    for (int64_t r : {0, 5, 31})
      for (int64_t i : {0, 3, 31}) {
        const int64_t at = (e * 32 + r) * 32 + i;
        CHECK(f32_at(gate, at) == e * 2048 + i * 64 + 2 * r);
        CHECK(f32_at(up, at) == e * 2048 + i * 64 + 2 * r + 1);
        CHECK(f32_at(down, at) == e * 1024 + i * 32 + r);
      }
}

TEST_CASE("hf: GPT-OSS folders Kiln would run otherwise are refused", "[models][hf][error]") {
  {
    TinyFolder t;
    make_gpt_oss(t, true);
    t.config["layer_types"] = {"full_attention"};
    CHECK_THAT(t.error(), Catch::Contains("layer_types: layer 0 is \"full_attention\""));
  }
  {
    TinyFolder t;
    make_gpt_oss(t, true);
    t.config["swiglu_limit"] = 10.0;
    CHECK_THAT(t.error(), Catch::Contains("swiglu_limit 10"));
  }
  {
    TinyFolder t;
    make_gpt_oss(t, true);
    t.config.erase("rope_scaling");
    CHECK_THAT(t.error(), Catch::Contains("GPT-OSS needs rope_scaling of type yarn"));
  }
  {
    TinyFolder t;
    make_gpt_oss(t, true);
    t.config["rope_scaling"]["beta_fast"] = 16.0;
    CHECK_THAT(t.error(), Catch::Contains("beta_fast/beta_slow other than 32/1"));
  }
  {
    TinyFolder t;  // the blocks disagree with the config's widths
    make_gpt_oss(t, true);
    t.tensor("model.layers.0.mlp.experts.down_proj_blocks").shape = {2, 16, 2, 16};
    CHECK_THAT(t.error(), Catch::Contains("tensor 'model.layers.0.mlp.experts.down_proj_blocks'") &&
                              Catch::Contains("implies U8 [2,32,1,16]"));
  }
  {
    TinyFolder t;  // widths that are not whole MXFP4 blocks
    make_gpt_oss(t, true);
    t.config["intermediate_size"] = 16;
    CHECK_THAT(t.error(), Catch::Contains("not whole blocks of 32"));
  }
  {
    TinyFolder t;
    t.config["quantization_config"] = {{"quant_method", "mxfp4"}};
    CHECK_THAT(t.error(), Catch::Contains("mxfp4 is read for gpt_oss's experts only"));
  }
}

TEST_CASE("hf: chat templates are kept as llama.cpp's converter keeps them", "[models][hf]") {
  {
    TinyFolder t;
    t.files["tokenizer_config.json"] = json{{"chat_template", "{{ messages }}"}}.dump();
    t.write();
    CHECK(open_model_file(t.dir.string()).get_string("tokenizer.chat_template") ==
          "{{ messages }}");
  }
  {
    TinyFolder t;  // a named list: the default, and the others by name
    t.files["tokenizer_config.json"] = json{{"chat_template",
                                             {{{"name", "default"}, {"template", "D"}},
                                              {{"name", "tool-use"}, {"template", "T"}}}}}
                                           .dump();
    t.write();
    GgufFile f = open_model_file(t.dir.string());
    CHECK(f.get_string("tokenizer.chat_template") == "D");
    CHECK(f.get_string("tokenizer.chat_template.tool_use") == "T");
    auto names = f.get_string_array("tokenizer.chat_templates");
    REQUIRE(names.size() == 1);
    CHECK(names[0] == "tool_use");
  }
  {
    TinyFolder t;  // newer folders: a file of its own
    t.files["chat_template.jinja"] = "{% for m in messages %}{{ m.content }}{% endfor %}";
    t.write();
    CHECK(open_model_file(t.dir.string()).get_string("tokenizer.chat_template") ==
          t.files["chat_template.jinja"]);
  }
  {
    TinyFolder t;
    t.files["tokenizer_config.json"] = json{{"chat_template", 7}}.dump();
    CHECK_THAT(t.error(), Catch::Contains("tokenizer_config.json") &&
                              Catch::Contains("chat_template is neither a string nor a list"));
  }
}

// A SentencePiece folder's added tokens (tokenizer_config.json's
// added_tokens_decoder) take their slots as llama.cpp's converter gives
// them: special (or special-looking) ones as control tokens, others as
// user-defined text with the word-start marks made spaces.
TEST_CASE("hf: added_tokens_decoder names a SentencePiece vocabulary's slots", "[models][hf]") {
  TinyFolder t;
  t.files["tokenizer.model"] = kiln::test::small_sentencepiece_model();  // 5 pieces, 6 slots
  t.files["tokenizer_config.json"] =
      json{{"added_tokens_decoder",
            {{"5", {{"content", "<|im_end|>"}, {"special", false}}},
             {"4", {{"content", "\xE2\x96\x81hello"}, {"special", false}}}}}}
          .dump();
  t.write();
  GgufFile f = open_model_file(t.dir.string());
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  REQUIRE(tokens.size() == 6);
  CHECK(tokens[5] == "<|im_end|>");
  CHECK(tokens[4] == " hello");
  CHECK(tokens[1] == "<s>");
  CHECK(f.get_i32_array("tokenizer.ggml.token_type")[5] == 3);  // control
  CHECK(f.get_i32_array("tokenizer.ggml.token_type")[4] == 4);  // user-defined
  t.files["tokenizer_config.json"] =
      json{{"added_tokens_decoder", {{"9", {{"content", "x"}}}}}}.dump();
  CHECK_THAT(t.error(), Catch::Contains("added token '9' is not an id below 6"));
}
