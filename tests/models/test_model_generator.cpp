// `kiln gen-model`'s writer: every architecture and weight type writes a file
// that reads back with llama.cpp's tensor names, ggml shapes, metadata and
// per-tensor types; weights have the intended distribution; the bytes depend
// only on the seed; the tokenizer (generated or copied) works with Kiln's;
// ModelConfig reads gemma3 files (windows, rope bases, attention scale) as
// llama.cpp does.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "ir/dtype.h"
#include "ir/error.h"
#include "kernels/quant/ggml_blocks.h"
#include "models/gguf.h"
#include "models/gguf_writer.h"
#include "models/model_config.h"
#include "models/model_generator.h"
#include "models/model_presets.h"
#include "models/tokenizer.h"
#include "support/temp_dir.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

using kiln::test::TempDir;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string vocab_dir() {
  if (const char* d = std::getenv("KILN_VOCAB_DIR"); d && *d) return d;
  return std::string(KILN_SOURCE_DIR) + "/../shared/data/vocab";
}

GenModelSummary generate(const ModelPreset& p, WeightFormat f, const std::string& path,
                         uint64_t seed = 1, int threads = 2, const std::string& vocab = "") {
  GenModelOptions o;
  o.format = f;
  o.seed = seed;
  o.threads = threads;
  o.vocab_path = vocab;
  return generate_model(p, o, path);
}

std::vector<float> dequantized(const GgufTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.elements()));
  switch (t.type) {
    case TensorType::f32: std::memcpy(out.data(), t.data, out.size() * 4); break;
    case TensorType::f16:
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);
        out[i] = f16_bits_to_f32(h);
      }
      break;
    default: ggml::dequantize(t.type, t.data, t.elements(), out.data());
  }
  return out;
}

void moments(const std::vector<float>& x, double* mean, double* stddev) {
  double s = 0, s2 = 0;
  int64_t bad = 0;
  for (float v : x) {
    bad += !std::isfinite(v);
    s += v;
    s2 += static_cast<double>(v) * v;
  }
  REQUIRE(bad == 0);
  *mean = s / static_cast<double>(x.size());
  *stddev = std::sqrt(s2 / static_cast<double>(x.size()) - *mean * *mean);
}

// llama.cpp's tensors for the preset, written out by hand per architecture
// (name -> ggml shape), independently of the generator's own plan.
std::map<std::string, std::vector<int64_t>> expected_shapes(const ModelPreset& p, int64_t vocab) {
  const int64_t e = p.n_embd, hd = p.head_dim, q = p.n_head * hd, kv = p.n_head_kv * hd;
  std::map<std::string, std::vector<int64_t>> m = {
      {"token_embd.weight", {e, vocab}},
      {"output_norm.weight", {e}},
  };
  // Gemma ties the output to the embedding, as llama.cpp's converter writes it.
  if (p.arch != "gemma3") m["output.weight"] = {e, vocab};
  for (int i = 0; i < p.n_layer; ++i) {
    std::string b = "blk." + std::to_string(i) + ".";
    m[b + "attn_norm.weight"] = {e};
    m[b + "attn_output.weight"] = {q, e};
    m[b + "ffn_norm.weight"] = {e};
    if (p.arch == "phi3") {  // q, k, v fused; gate and up fused
      m[b + "attn_qkv.weight"] = {e, q + 2 * kv};
      m[b + "ffn_up.weight"] = {e, 2 * p.n_ff};
      m[b + "ffn_down.weight"] = {p.n_ff, e};
      continue;
    }
    m[b + "attn_q.weight"] = {e, q};
    m[b + "attn_k.weight"] = {e, kv};
    m[b + "attn_v.weight"] = {e, kv};
    if (p.arch == "qwen2") {
      m[b + "attn_q.bias"] = {q};
      m[b + "attn_k.bias"] = {kv};
      m[b + "attn_v.bias"] = {kv};
    }
    if (p.arch == "qwen3" || p.arch == "qwen3moe" || p.arch == "gemma3") {
      m[b + "attn_q_norm.weight"] = {hd};
      m[b + "attn_k_norm.weight"] = {hd};
    }
    if (p.arch == "gemma3") {
      m[b + "post_attention_norm.weight"] = {e};
      m[b + "post_ffw_norm.weight"] = {e};
    }
    if (p.n_expert > 0) {
      int64_t ff = p.arch == "qwen3moe" ? p.n_ff_exp : p.n_ff, x = p.n_expert;
      m[b + "ffn_gate_inp.weight"] = {e, x};
      m[b + "ffn_gate_exps.weight"] = {e, ff, x};
      m[b + "ffn_up_exps.weight"] = {e, ff, x};
      m[b + "ffn_down_exps.weight"] = {ff, e, x};
    } else {
      m[b + "ffn_gate.weight"] = {e, p.n_ff};
      m[b + "ffn_up.weight"] = {e, p.n_ff};
      m[b + "ffn_down.weight"] = {p.n_ff, e};
    }
  }
  return m;
}

// The type a q4_k_m tensor must have (llama-quantize's Q4_K_M mix, with the
// documented substitutions).
TensorType q4_k_m_type(const ModelPreset& p, const GgufTensor& t) {
  const std::string& n = t.name;
  if (t.shape.size() == 1 || n.find("ffn_gate_inp") != std::string::npos) return TensorType::f32;
  int layer = n.rfind("blk.", 0) == 0 ? std::stoi(n.substr(4)) : -1;
  bool more_bits = layer >= 0 && (layer < p.n_layer / 8 || layer >= 7 * p.n_layer / 8 ||
                                  (layer - p.n_layer / 8) % 3 == 2);
  TensorType want = TensorType::q4_K;
  if (n == "output.weight" || (n == "token_embd.weight" && p.tied_embeddings))
    want = TensorType::q6_K;
  const bool v_like = n.find("attn_v.weight") != std::string::npos ||
                      n.find("attn_qkv.weight") != std::string::npos;
  if (v_like && more_bits) want = TensorType::q6_K;
  if (n.find("ffn_down") != std::string::npos && more_bits) want = TensorType::q6_K;
  if (p.n_expert == 8) {
    if (n.find("attn_v.weight") != std::string::npos ||
        n.find("attn_k.weight") != std::string::npos)
      want = TensorType::q8_0;
    if (n.find("attn_output.weight") != std::string::npos) want = TensorType::q5_K;
  }
  if (t.shape[0] % 256 != 0 && want == TensorType::q4_K) want = TensorType::q5_0;  // llama.cpp's
  if (t.shape[0] % 256 != 0 && want == TensorType::q5_K) want = TensorType::q5_1;  // fallbacks
  if (t.shape[0] % 256 != 0 && want == TensorType::q6_K) want = TensorType::q8_0;
  return want;
}

void check_model(const GgufFile& f, const ModelPreset& p, WeightFormat format, int64_t vocab) {
  const std::string a = p.arch;
  CHECK(f.get_string("general.architecture") == a);
  CHECK(f.get_string("general.name") == p.name);
  CHECK(f.get_u32("general.file_type") == llama_file_type(format));
  CHECK(f.get_u32("general.quantization_version") == 2);
  CHECK(f.get_u32(a + ".context_length") == p.n_ctx);
  CHECK(f.get_u32(a + ".embedding_length") == p.n_embd);
  CHECK(f.get_u32(a + ".block_count") == p.n_layer);
  CHECK(f.get_u32(a + ".feed_forward_length") == p.n_ff);
  CHECK(f.get_u32(a + ".attention.head_count") == p.n_head);
  CHECK(f.get_u32(a + ".attention.head_count_kv") == p.n_head_kv);
  CHECK(f.get_u32(a + ".rope.dimension_count") == p.head_dim);
  CHECK(f.get_u32(a + ".vocab_size") == vocab);
  CHECK(f.get_f32(a + ".rope.freq_base") == p.rope_base);
  CHECK(f.get_f32(a + ".attention.layer_norm_rms_epsilon") == p.rms_eps);
  CHECK(f.has(a + ".attention.sliding_window") == (a == "gemma3"));
  if (a == "qwen3" || a == "qwen3moe" || a == "gemma3") {
    CHECK(f.get_u32(a + ".attention.key_length") == p.head_dim);
    CHECK(f.get_u32(a + ".attention.value_length") == p.head_dim);
  }
  if (p.n_expert > 0) {
    CHECK(f.get_u32(a + ".expert_count") == p.n_expert);
    CHECK(f.get_u32(a + ".expert_used_count") == p.n_expert_used);
    CHECK(f.has(a + ".expert_feed_forward_length") == (a == "qwen3moe"));
  } else {
    CHECK_FALSE(f.has(a + ".expert_count"));
  }

  auto want = expected_shapes(p, vocab);
  CHECK(f.tensors().size() == want.size());
  for (const auto& [name, shape] : want) {
    INFO("tensor " << name);
    const GgufTensor* t = f.find_tensor(name);
    REQUIRE(t != nullptr);
    CHECK(t->shape == shape);
    bool norm_or_1d = shape.size() == 1 || name.find("_norm.") != std::string::npos ||
                      name.find("ffn_gate_inp") != std::string::npos;
    switch (format) {
      case WeightFormat::f32: CHECK(t->type == TensorType::f32); break;
      case WeightFormat::f16:
        CHECK(t->type == (norm_or_1d ? TensorType::f32 : TensorType::f16));
        break;
      case WeightFormat::q8_0:
        CHECK(t->type == (norm_or_1d ? TensorType::f32 : TensorType::q8_0));
        break;
      case WeightFormat::q4_0:
      case WeightFormat::q4_1:
      case WeightFormat::q5_0:
      case WeightFormat::q5_1:
        if (norm_or_1d)
          CHECK(t->type == TensorType::f32);
        else if (name == "output.weight" || (name == "token_embd.weight" && p.tied_embeddings))
          CHECK(t->type == TensorType::q6_K);
        else if (p.n_expert == 8 && (name.find("attn_k.") != std::string::npos ||
                                     name.find("attn_v.") != std::string::npos))
          CHECK(t->type == TensorType::q8_0);
        else
          CHECK(t->type == (format == WeightFormat::q4_0   ? TensorType::q4_0
                            : format == WeightFormat::q4_1 ? TensorType::q4_1
                            : format == WeightFormat::q5_0 ? TensorType::q5_0
                                                           : TensorType::q5_1));
        break;
      case WeightFormat::q4_k_m: CHECK(t->type == q4_k_m_type(p, *t)); break;
      case WeightFormat::q2_k:
      case WeightFormat::q3_k_m:
      case WeightFormat::q5_k_m:
      case WeightFormat::iq4_nl:
      case WeightFormat::iq4_xs:
        // Tensor by tensor against llama_model_quantize in mixes_llamacpp.py.
        CHECK(is_block_quantized(t->type) == !norm_or_1d);
        break;
    }
  }
}

const std::vector<std::string>& families() {
  static const std::vector<std::string> f = {"llama",     "qwen2",  "qwen3", "qwen3moe",
                                             "llama-moe", "gemma3", "phi3"};
  return f;
}

// A gemma3 file of these shapes with metadata only, plus `extra` keys and the
// embedding the vocabulary size is read from, as llama.cpp's converter names them.
ModelConfig gemma3_config(int64_t n_embd, int64_t n_layer, int64_t n_head, int64_t head_dim,
                          std::vector<std::pair<std::string, GgufWriter::Value>> extra = {}) {
  auto u32 = [](int64_t v) { return GgufWriter::u32(static_cast<uint32_t>(v)); };
  GgufWriter w;
  w.add("general.architecture", GgufWriter::str("gemma3"));
  w.add("gemma3.context_length", u32(32768));
  w.add("gemma3.embedding_length", u32(n_embd));
  w.add("gemma3.block_count", u32(n_layer));
  w.add("gemma3.feed_forward_length", u32(4 * n_embd));
  w.add("gemma3.attention.head_count", u32(n_head));
  w.add("gemma3.attention.head_count_kv", u32(n_head / 2));
  w.add("gemma3.attention.key_length", u32(head_dim));
  w.add("gemma3.attention.value_length", u32(head_dim));
  w.add("gemma3.rope.freq_base", GgufWriter::f32(1e6f));
  w.add("gemma3.attention.layer_norm_rms_epsilon", GgufWriter::f32(1e-6f));
  for (auto& [key, value] : extra) w.add(key, std::move(value));
  w.add_tensor("token_embd.weight", TensorType::f32, {n_embd, 4},
               std::string(static_cast<size_t>(n_embd) * 16, '\0'));
  return ModelConfig::from_gguf(GgufFile::open_memory(w.bytes(), "gemma3.gguf"));
}

}  // namespace

TEST_CASE("gen-model: every architecture and type reads back as llama.cpp lays it out",
          "[models][gen_model]") {
  TempDir tmp("kiln-gen-model");
  for (const std::string& family : families()) {
    ModelPreset p = find_model_preset(family, "tiny");
    for (WeightFormat f :
         {WeightFormat::f32, WeightFormat::f16, WeightFormat::q8_0, WeightFormat::q4_0,
          WeightFormat::q4_1, WeightFormat::q5_0, WeightFormat::q5_1, WeightFormat::q2_k,
          WeightFormat::q3_k_m, WeightFormat::q4_k_m, WeightFormat::q5_k_m, WeightFormat::iq4_nl,
          WeightFormat::iq4_xs}) {
      std::string name = family + "-" + std::string(weight_format_name(f)) + ".gguf";
      INFO(name);
      GenModelSummary s = generate(p, f, tmp.path(name));
      GgufFile file = GgufFile::open(tmp.path(name));
      CHECK(s.file_bytes == file.size());
      CHECK(static_cast<size_t>(s.n_vocab) ==
            file.get_string_array("tokenizer.ggml.tokens").size());
      check_model(file, p, f, s.n_vocab);
      // The summary's plan is what was written, in file order.
      REQUIRE(s.tensors.size() == file.tensors().size());
      for (size_t i = 0; i < s.tensors.size(); ++i) {
        CHECK(s.tensors[i].name == file.tensors()[i].name);
        CHECK(s.tensors[i].type == file.tensors()[i].type);
      }
    }
  }
}

TEST_CASE("gen-model: phi3's LongRoPE factors and scale read back, chosen by context",
          "[models][gen_model]") {
  TempDir tmp("kiln-gen-model");
  const ModelPreset p = find_model_preset("phi3", "tiny-longrope");
  generate(p, WeightFormat::f16, tmp.path("phi3.gguf"));
  GgufFile file = GgufFile::open(tmp.path("phi3.gguf"));
  ModelConfig c = ModelConfig::from_gguf(file);
  CHECK(c.fused_qkv);
  CHECK(c.fused_gate_up);
  CHECK(c.rope_neox);
  REQUIRE(c.rope_factors_long.size() == static_cast<size_t>(p.head_dim / 2));
  REQUIRE(c.rope_factors_short.size() == c.rope_factors_long.size());
  CHECK(c.rope_factors_long != c.rope_factors_short);
  for (float f : c.rope_factors_long) CHECK(f > 0);
  // llama.cpp's converter: sqrt(1 + ln(context / original) / ln(original)).
  CHECK(c.rope_scaling.attn_factor ==
        Approx(std::sqrt(1 + std::log(4096.0 / 64) / std::log(64.0))).epsilon(1e-6));
  CHECK(c.rope_scaling.orig_ctx == 64);
  c.choose_rope_factors(64);
  CHECK(c.rope_scaling.freq_factors == c.rope_factors_short);
  c.choose_rope_factors(65);
  CHECK(c.rope_scaling.freq_factors == c.rope_factors_long);
  // A file with one set of factors and not the other is refused.
  GgufWriter w;
  for (const auto& [key, value] : file.metadata()) w.add(key, GgufWriter::copy_of(value));
  for (const GgufTensor& t : file.tensors()) {
    if (t.name == "rope_factors_short.weight") continue;
    const uint8_t* data = t.data;
    const uint64_t n = t.nbytes;
    w.add_tensor(t.name, t.type, t.shape,
                 [data, n](const GgufWriter::ByteSink& sink) { sink(data, n); });
  }
  w.write(tmp.path("half.gguf"));
  CHECK_THROWS_WITH(ModelConfig::from_gguf(GgufFile::open(tmp.path("half.gguf"))),
                    Catch::Contains("rope_factors_short.weight"));
}

TEST_CASE("gen-model: weights are normal with the intended scale, norms near 1",
          "[models][gen_model]") {
  TempDir tmp("kiln-gen-model");
  ModelPreset p = find_model_preset("qwen3moe", "tiny");
  for (WeightFormat f : {WeightFormat::f16, WeightFormat::q8_0, WeightFormat::q4_k_m}) {
    INFO(weight_format_name(f));
    generate(p, f, tmp.path("m.gguf"));
    GgufFile file = GgufFile::open(tmp.path("m.gguf"));
    for (const GgufTensor& t : file.tensors()) {
      INFO(t.name << " " << tensor_type_name(t.type));
      std::vector<float> x = dequantized(t);
      double mean, sd;
      moments(x, &mean, &sd);
      // Sampling error (4 standard errors) plus what the format adds: Q4_K's
      // 4-bit grid widens the spread of such small weights by about 10 %.
      double n = static_cast<double>(x.size());
      bool norm = t.name.find("_norm.") != std::string::npos;
      CHECK(mean == Approx(norm ? 1.0 : 0.0).margin(4 * 0.02 / std::sqrt(n) + 1e-4));
      CHECK(sd == Approx(0.02).epsilon(4 / std::sqrt(2 * n) +
                                       (t.type == TensorType::q4_K ? 0.15 : 0.03)));
      if (n >= 10000) {
        // Normal, not uniform: about 4.55 % of the weights lie beyond 2 sigma.
        double tail = 0;
        for (float v : x) tail += std::fabs(v - mean) > 2 * sd;
        CHECK(tail / n == Approx(0.0455).margin(0.01));
      }
    }
  }
}

TEST_CASE("gen-model: the same seed writes the same bytes on any thread count",
          "[models][gen_model]") {
  TempDir tmp("kiln-gen-model");
  ModelPreset p = find_model_preset("qwen3moe", "tiny");
  generate(p, WeightFormat::q4_k_m, tmp.path("a.gguf"), 42, 1);
  generate(p, WeightFormat::q4_k_m, tmp.path("b.gguf"), 42, 3);
  generate(p, WeightFormat::q4_k_m, tmp.path("c.gguf"), 43, 2);
  std::string a = read_all(tmp.path("a.gguf"));
  CHECK(a.size() > 1000000);
  CHECK(a == read_all(tmp.path("b.gguf")));
  GgufFile fa = GgufFile::open(tmp.path("a.gguf")), fc = GgufFile::open(tmp.path("c.gguf"));
  for (const GgufTensor& t : fa.tensors()) {
    INFO(t.name);
    CHECK(std::memcmp(t.data, fc.tensor(t.name).data, t.nbytes) != 0);
  }
  CHECK_FALSE(fs::exists(tmp.path("a.gguf.partial")));
}

TEST_CASE("gen-model: the byte-level vocabulary round-trips any text through Kiln's tokenizer",
          "[models][gen_model]") {
  TempDir tmp("kiln-gen-model");
  generate(find_model_preset("llama", "tiny"), WeightFormat::q8_0, tmp.path("m.gguf"));
  GgufFile f = GgufFile::open(tmp.path("m.gguf"));
  CHECK(f.get_string("tokenizer.ggml.model") == "gpt2");
  CHECK(f.get_string("tokenizer.ggml.pre") == "default");
  auto tok = Tokenizer::from_gguf(f);
  CHECK(tok->vocab_size() == f.tensor("token_embd.weight").shape[1]);
  CHECK(tok->bos_id() == 256);
  CHECK(tok->eos_id() == 257);
  CHECK(tok->add_bos_default());
  for (std::string text :
       std::vector<std::string>{"Hello, world!", " the theory of everything\n\n\tindented",
                                "Ünïcödé 数字 😀 123456", std::string("\x00\x01\x7f", 3), ""}) {
    INFO(text);
    std::vector<int32_t> ids = tok->encode(text, true);
    REQUIRE(!ids.empty());
    CHECK(ids[0] == tok->bos_id());
    CHECK(tok->decode(ids) == text);
  }
  // The merges apply: " the" is one token, "x" is its byte.
  CHECK(tok->encode(" the", false) == std::vector<int32_t>{tok->vocab().find("\xC4\xA0the")});
  CHECK(tok->encode("x", false) == std::vector<int32_t>{'x'});
  // The ids llama.cpp (llama-cpp-python 0.3.36) gives for the same file.
  CHECK(tok->encode("Hello, the world!", true) == std::vector<int32_t>{256, 72, 101, 108, 108, 111,
                                                                       44, 260, 32, 119, 111, 114,
                                                                       108, 100, 33});
  CHECK(tok->encode(" the theory\n\n in there", true) ==
        std::vector<int32_t>{256, 260, 260, 111, 114, 121, 10, 10, 32, 261, 260, 266});
  CHECK(tok->encode("\xC3\x9Cn 123", true) ==
        std::vector<int32_t>{256, 195, 156, 110, 32, 49, 50, 51});

  // A preset with a vocabulary size pads with llama.cpp's unused [PADn] tokens.
  ModelPreset big = find_model_preset("llama", "tiny");
  big.n_vocab = 1000;
  generate(big, WeightFormat::f16, tmp.path("padded.gguf"));
  GgufFile padded = GgufFile::open(tmp.path("padded.gguf"));
  auto tokens = padded.get_string_array("tokenizer.ggml.tokens");
  REQUIRE(tokens.size() == 1000);
  CHECK(tokens[999] == "[PAD999]");
  CHECK(padded.get_i32_array("tokenizer.ggml.token_type")[999] == 5);
  CHECK(padded.tensor("output.weight").shape == std::vector<int64_t>{256, 1000});
  CHECK(Tokenizer::from_gguf(padded)->decode(Tokenizer::from_gguf(padded)->encode("pad", true)) ==
        "pad");
}

TEST_CASE("gen-model: --vocab copies every tokenizer key and sets the vocabulary size",
          "[models][gen_model]") {
  std::string spm = vocab_dir() + "/ggml-vocab-llama-spm.gguf";
  if (!fs::exists(spm)) {
    WARN("skipped: " << spm << " is absent (set KILN_VOCAB_DIR to the vocab test data)");
    return;
  }
  TempDir tmp("kiln-gen-model");
  ModelPreset p = find_model_preset("llama", "tiny");
  p.n_layer = 1;
  GenModelSummary s = generate(p, WeightFormat::q4_0, tmp.path("m.gguf"), 1, 2, spm);
  GgufFile src = GgufFile::open(spm), f = GgufFile::open(tmp.path("m.gguf"));
  int64_t n = static_cast<int64_t>(src.get_string_array("tokenizer.ggml.tokens").size());
  CHECK(s.n_vocab == n);
  CHECK(f.tensor("token_embd.weight").shape == std::vector<int64_t>{256, n});
  CHECK(f.get_u32("llama.vocab_size") == n);
  int copied = 0;
  for (const auto& [key, value] : src.metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    INFO(key);
    const GgufValue* got = f.find(key);
    REQUIRE(got != nullptr);
    CHECK(got->type == value.type);
    CHECK(got->elem_type == value.elem_type);
    CHECK(got->count == value.count);
    CHECK(got->strings == value.strings);
    if (value.data) CHECK(std::memcmp(got->data, value.data, value.count) == 0);
    ++copied;
  }
  CHECK(copied >= 5);
  auto a = Tokenizer::from_gguf(src), b = Tokenizer::from_gguf(f);
  std::string text = "The quick brown fox, 1234 ünïcode";
  CHECK(a->encode(text, true) == b->encode(text, true));
}

TEST_CASE("gen-model: Q4_K_M mixes types as llama-quantize does", "[models][gen_model]") {
  // TinyLlama-1.1B Q4_K_M as llama.cpp writes it: 135 Q4_K, 21 Q6_K, 45 F32.
  auto plan =
      plan_model_tensors(find_model_preset("llama", "tinyllama-1.1b"), 32000, WeightFormat::q4_k_m);
  std::map<TensorType, int> count;
  int64_t params = 0;
  for (const PlannedTensor& t : plan) {
    ++count[t.type];
    params += t.elements();
    CHECK(t.note.empty());
  }
  CHECK(count[TensorType::q4_K] == 135);
  CHECK(count[TensorType::q6_K] == 21);
  CHECK(count[TensorType::f32] == 45);
  CHECK(params == 1100048384);
  auto type_of = [&](const std::string& name) {
    for (const PlannedTensor& t : plan)
      if (t.name == name) return t.type;
    FAIL("no tensor " << name);
    return TensorType::f32;
  };
  CHECK(type_of("token_embd.weight") == TensorType::q4_K);
  CHECK(type_of("blk.1.attn_v.weight") == TensorType::q6_K);  // i < n/8
  CHECK(type_of("blk.2.attn_v.weight") == TensorType::q4_K);
  CHECK(type_of("blk.4.ffn_down.weight") == TensorType::q6_K);   // (i - n/8) % 3 == 2
  CHECK(type_of("blk.19.ffn_down.weight") == TensorType::q6_K);  // i >= 7n/8
  CHECK(type_of("blk.18.ffn_down.weight") == TensorType::q4_K);

  // Rows of 896 (Qwen2.5-0.5B) are not whole K-quant blocks: llama.cpp's
  // fallbacks, Q4_K -> Q5_0 and Q6_K -> Q8_0, as noted.
  auto q2 = plan_model_tensors(find_model_preset("qwen2", "small"), 151936, WeightFormat::q4_k_m);
  for (const PlannedTensor& t : q2) {
    INFO(t.name);
    if (t.shape.size() < 2) continue;
    if (t.shape[0] == 896) {
      bool six = t.name == "output.weight" || t.name == "blk.2.attn_v.weight" ||
                 t.name == "blk.3.attn_v.weight";  // use_more_bits layers of 4
      CHECK(t.type == (six ? TensorType::q8_0 : TensorType::q5_0));
      CHECK(t.note.empty() == (t.name == "output.weight"));  // llama.cpp's own rule there
    } else {
      CHECK(t.type != TensorType::q8_0);
    }
  }
  // Tied embeddings: token_embd takes the output's Q6_K.
  ModelPreset tied = find_model_preset("qwen3", "small");
  tied.tied_embeddings = true;
  auto q3 = plan_model_tensors(tied, 151936, WeightFormat::q4_k_m);
  CHECK(q3.front().name == "token_embd.weight");
  CHECK(q3.front().type == TensorType::q6_K);
  CHECK(q3.back().name == "output_norm.weight");
}

TEST_CASE("gen-model: the Q2_K, Q3_K_M and IQ4_XS mixes on TinyLlama's shapes",
          "[models][gen_model]") {
  // 32 query heads on 4 KV heads: Q2_K gives attn_v Q4_K (llama.cpp's n_gqa
  // >= 4 rule, which the tiny presets of mixes_llamacpp.py do not reach);
  // Q3_K_M's ffn_down is Q5_K in the first 22 / 16 = 1 layer.
  const ModelPreset& p = find_model_preset("llama", "tinyllama-1.1b");
  auto type_in = [&](WeightFormat f, const std::string& name) {
    for (const PlannedTensor& t : plan_model_tensors(p, 32000, f))
      if (t.name == name) return t.type;
    FAIL("no tensor " << name);
    return TensorType::f32;
  };
  CHECK(type_in(WeightFormat::q2_k, "blk.5.attn_v.weight") == TensorType::q4_K);
  CHECK(type_in(WeightFormat::q2_k, "blk.5.ffn_down.weight") == TensorType::q3_K);
  CHECK(type_in(WeightFormat::q2_k, "blk.5.ffn_up.weight") == TensorType::q2_K);
  CHECK(type_in(WeightFormat::q3_k_m, "blk.0.ffn_down.weight") == TensorType::q5_K);
  CHECK(type_in(WeightFormat::q3_k_m, "blk.1.ffn_down.weight") == TensorType::q4_K);
  CHECK(type_in(WeightFormat::q3_k_m, "blk.1.attn_v.weight") == TensorType::q5_K);
  CHECK(type_in(WeightFormat::q3_k_m, "blk.2.attn_v.weight") == TensorType::q4_K);
  CHECK(type_in(WeightFormat::q5_k_m, "output.weight") == TensorType::q6_K);
  CHECK(type_in(WeightFormat::iq4_xs, "blk.5.attn_v.weight") == TensorType::q5_K);
  CHECK(type_in(WeightFormat::iq4_xs, "blk.1.ffn_down.weight") == TensorType::q5_K);  // < 22 / 8
  CHECK(type_in(WeightFormat::iq4_xs, "blk.3.ffn_down.weight") == TensorType::iq4_xs);
}

TEST_CASE("gen-model: gemma3/1b plans Gemma 3 1B's tensors with llama-quantize's fallbacks",
          "[models][gen_model]") {
  auto plan = plan_model_tensors(find_model_preset("gemma3", "1b"), 262144, WeightFormat::q4_k_m);
  int64_t params = 0;
  for (const PlannedTensor& t : plan) params += t.elements();
  CHECK(plan.size() == 1 + 26 * 13 + 1);  // no output.weight: tied
  CHECK(params == 999885952);             // google/gemma-3-1b-pt's parameter count
  auto find = [&](const std::string& name) -> const PlannedTensor& {
    for (const PlannedTensor& t : plan)
      if (t.name == name) return t;
    FAIL("no tensor " << name);
    return plan.front();
  };
  // Rows of 1152 are not whole K-quant blocks. The tied embedding takes
  // llama.cpp's own Q8_0 for such an output; Q4_K falls back to Q5_0, noted.
  CHECK(find("token_embd.weight").type == TensorType::q8_0);
  CHECK(find("token_embd.weight").note.empty());
  CHECK(find("token_embd.weight").stddev == 0.02f);
  CHECK(find("blk.3.attn_q.weight").type == TensorType::q5_0);
  CHECK(find("blk.3.attn_q.weight").note.find("Q5_0") != std::string::npos);
  CHECK(find("blk.3.ffn_up.weight").type == TensorType::q5_0);
  CHECK(find("blk.0.attn_v.weight").type == TensorType::q8_0);  // Q6_K's fallback
  // Rows of 1024 (4 heads of 256) and 6912 are.
  CHECK(find("blk.3.attn_output.weight").type == TensorType::q4_K);
  CHECK(find("blk.0.ffn_down.weight").type == TensorType::q6_K);  // i < n/8
  CHECK(find("blk.3.ffn_down.weight").type == TensorType::q4_K);
  CHECK(find("blk.5.ffn_down.weight").type == TensorType::q6_K);  // (i - n/8) % 3 == 2
  for (const char* norm : {"attn_norm", "attn_q_norm", "attn_k_norm", "post_attention_norm",
                           "ffn_norm", "post_ffw_norm"}) {
    const PlannedTensor& t = find("blk.25." + std::string(norm) + ".weight");
    INFO(t.name);
    CHECK(t.type == TensorType::f32);
    CHECK(t.mean == 1.0f);  // the converter stores Gemma's 1 + w
  }
  CHECK(find("blk.25.attn_q_norm.weight").shape == std::vector<int64_t>{256});
}

TEST_CASE("gen-model: gemma3 files read with llama.cpp's windows, rope bases and attention scale",
          "[models][gen_model][model_config]") {
  TempDir tmp("kiln-gen-model");
  generate(find_model_preset("gemma3", "tiny"), WeightFormat::f16, tmp.path("g.gguf"));
  GgufFile f = GgufFile::open(tmp.path("g.gguf"));
  ModelConfig c = ModelConfig::from_gguf(f);
  CHECK(c.arch == "gemma3");
  CHECK(c.n_embd == 256);
  CHECK(c.n_layer == 6);
  CHECK(c.n_head == 4);
  CHECK(c.n_head_kv == 2);
  CHECK(c.head_dim == 128);
  CHECK(c.n_ff == 768);
  CHECK(c.n_vocab == f.tensor("token_embd.weight").shape[1]);
  CHECK(f.find_tensor("output.weight") == nullptr);
  CHECK(c.rms_eps == Approx(1e-6));
  CHECK(c.rope_neox);
  CHECK(c.qk_norm);
  CHECK_FALSE(c.qkv_bias);
  CHECK_FALSE(c.moe());
  CHECK(c.sliding_window == 512);
  CHECK(c.swa_pattern == 6);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    INFO("layer " << l);
    CHECK(c.sliding(l) == (l != 5));  // every 6th layer is global
    CHECK(c.rope_base_for(l) == (l == 5 ? 1e6 : 1e4));
    CHECK(c.rope_scaling_for(l).factor == 1);
  }
  // The head size, not n_embd / n_head (64): n_head * head_dim is 512 here.
  CHECK(c.attn_scale == 1.0 / std::sqrt(128.0));

  // Without the window key (llama.cpp: no SWA), every layer is global.
  ModelPreset global = find_model_preset("gemma3", "tiny");
  global.sliding_window = 0;
  generate(global, WeightFormat::f16, tmp.path("global.gguf"));
  ModelConfig g = ModelConfig::from_gguf(GgufFile::open(tmp.path("global.gguf")));
  for (int64_t l = 0; l < g.n_layer; ++l) {
    CHECK_FALSE(g.sliding(l));
    CHECK(g.rope_base_for(l) == 1e6);
  }

  // Gemma 3 1B: 26 layers, 1/sqrt(256) (n_embd / n_head is 288).
  ModelConfig b1 =
      gemma3_config(1152, 26, 4, 256, {{"gemma3.attention.sliding_window", GgufWriter::u32(512)}});
  CHECK(b1.attn_scale == 1.0 / 16);
  CHECK(b1.sliding(24));
  CHECK_FALSE(b1.sliding(23));
  CHECK(b1.rope_base_for(23) == 1e6);
  // Gemma 3 27B (62 layers, as llama.cpp tells it): 1/sqrt(5376 / 32), not 1/sqrt(128).
  CHECK(gemma3_config(5376, 62, 32, 128).attn_scale == 1.0 / std::sqrt(168.0));
  CHECK(gemma3_config(5376, 61, 32, 128).attn_scale == 1.0 / std::sqrt(128.0));
  // Gemma 3 4B: linear rope scaling 8 on the global layers only.
  ModelConfig b4 = gemma3_config(2560, 34, 8, 256,
                                 {{"gemma3.attention.sliding_window", GgufWriter::u32(1024)},
                                  {"gemma3.rope.scaling.type", GgufWriter::str("linear")},
                                  {"gemma3.rope.scaling.factor", GgufWriter::f32(8)}});
  CHECK(b4.rope_scaling.factor == 8);
  CHECK(b4.rope_scaling_for(5).factor == 8);
  CHECK(b4.rope_base_for(5) == 1e6);
  CHECK(b4.rope_scaling_for(4).factor == 1);
  CHECK(b4.rope_base_for(4) == 1e4);
  CHECK(b4.attn_scale == 1.0 / 16);
  // llama.cpp: a missing type is linear, the factor may be under its old key;
  // YaRN reads its original context (default: the training context) and
  // attention factor; an unknown type is refused.
  CHECK(gemma3_config(256, 6, 4, 128, {{"gemma3.rope.scaling.factor", GgufWriter::f32(4)}})
            .rope_scaling == RopeScaling{4});
  CHECK(gemma3_config(256, 6, 4, 128, {{"gemma3.rope.scale_linear", GgufWriter::f32(2)}})
            .rope_scaling == RopeScaling{2});
  RopeScaling yarn = gemma3_config(256, 6, 4, 128,
                                   {{"gemma3.rope.scaling.type", GgufWriter::str("yarn")},
                                    {"gemma3.rope.scaling.factor", GgufWriter::f32(4)},
                                    {"gemma3.rope.scaling.attn_factor", GgufWriter::f32(0.5)}})
                         .rope_scaling;
  CHECK(yarn == RopeScaling{4, true, 32768, 0.5});
  CHECK(gemma3_config(256, 6, 4, 128,
                      {{"gemma3.rope.scaling.type", GgufWriter::str("none")},
                       {"gemma3.rope.scaling.factor", GgufWriter::f32(4)}})
            .rope_scaling == RopeScaling{});
  REQUIRE_THROWS_WITH(
      gemma3_config(256, 6, 4, 128, {{"gemma3.rope.scaling.type", GgufWriter::str("longrope")}}),
      Catch::Contains("gemma3.rope.scaling.type") && Catch::Contains("longrope"));
  // Logit soft-capping, which llama.cpp applies when the key is set, is refused.
  REQUIRE_THROWS_WITH(
      gemma3_config(256, 6, 4, 128, {{"gemma3.final_logit_softcapping", GgufWriter::f32(30)}}),
      Catch::Contains("gemma3.gguf") && Catch::Contains("gemma3.final_logit_softcapping"));
  CHECK(gemma3_config(256, 6, 4, 128, {{"gemma3.final_logit_softcapping", GgufWriter::f32(0)}})
            .attn_scale == 1.0 / std::sqrt(128.0));
}

TEST_CASE("gen-model: bad presets, types and vocabularies are named",
          "[models][gen_model][error]") {
  REQUIRE_THROWS_WITH(
      find_model_preset("gpt5", "tiny"),
      Catch::Contains("unknown model architecture 'gpt5' (known: llama, llama-moe, qwen2"));
  // A file of an architecture Kiln has no description of names it and the known ones.
  GgufWriter unknown;
  unknown.add("general.architecture", GgufWriter::str("mamba2"));
  REQUIRE_THROWS_WITH(
      ModelConfig::from_gguf(GgufFile::open_memory(unknown.bytes(), "mamba2.gguf")),
      Catch::Contains("mamba2.gguf") &&
          Catch::Contains("architecture 'mamba2' is not supported (llama, qwen2, qwen3, "
                          "qwen3moe, gemma3, gpt-oss, phi3)"));
  REQUIRE_THROWS_WITH(find_model_preset("qwen3", "huge"),
                      Catch::Contains("unknown preset 'huge' for architecture 'qwen3' (known: "
                                      "tiny, small)"));
  REQUIRE_THROWS_WITH(parse_weight_format("q5_k"),
                      Catch::Contains("unknown weight type 'q5_k' (known: f32, f16, q8_0"));
  TempDir tmp("kiln-gen-model");
  ModelPreset p = find_model_preset("llama", "tiny");
  REQUIRE_THROWS_WITH(generate(p, WeightFormat::f16, tmp.path("m.gguf"), 1, 1, "/nonexistent.gguf"),
                      Catch::Contains("/nonexistent.gguf"));
  p.n_head_kv = 3;
  REQUIRE_THROWS_WITH(
      generate(p, WeightFormat::f16, tmp.path("m.gguf")),
      Catch::Contains("model preset 'llama/tiny': 4 heads cannot share 3 KV heads"));
  REQUIRE_THROWS_WITH(
      generate(find_model_preset("llama", "tiny"), WeightFormat::f16, "/nonexistent-dir/m.gguf"),
      Catch::Contains("/nonexistent-dir/m.gguf"));
  CHECK_FALSE(fs::exists(tmp.path("m.gguf")));
}
