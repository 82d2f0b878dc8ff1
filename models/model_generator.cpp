#include "models/model_generator.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <thread>

#include "ir/dtype.h"
#include "ir/error.h"
#include "kernels/quant/ggml_blocks.h"
#include "models/arch/arch.h"
#include "models/chunk_stream.h"
#include "models/gguf.h"
#include "models/gguf_writer.h"
#include "models/unicode.h"
#include "models/vocab.h"

namespace kiln {

namespace {

// Matrices, embeddings, router, biases. Gemma 3 scales its embeddings by
// sqrt(n_embd) at run time, which keeps 0.02 fine for its token_embd too:
// 0.02 * sqrt(n_embd) is 0.32 in gemma3/tiny and 0.68 in 1b, O(1) like the
// residual stream elsewhere, and the tied output's logits spread as the
// other architectures' do.
constexpr float kWeightStd = 0.02f;
constexpr float kNormStd = 0.02f;  // norm weights: 1 + N(0, kNormStd^2)
// Box-Muller on 24-bit uniforms reaches 5.8 standard deviations at most, so
// these stay above 0.3.
constexpr float kRopeFactorMean = 1.5f, kRopeFactorStd = 0.2f;
constexpr int64_t kChunkElements = 1 << 20;  // elements generated per task
constexpr uint32_t kQuantVersion = 2;        // ggml's GGML_QNT_VERSION

struct FormatInfo {
  WeightFormat format;
  std::string_view name;
  uint32_t file_type;
  TensorType matrix_type;
};

constexpr FormatInfo kFormats[] = {
    {WeightFormat::f32, "f32", 0, TensorType::f32},
    {WeightFormat::f16, "f16", 1, TensorType::f16},
    {WeightFormat::q8_0, "q8_0", 7, TensorType::q8_0},
    {WeightFormat::q4_0, "q4_0", 2, TensorType::q4_0},
    {WeightFormat::q4_1, "q4_1", 3, TensorType::q4_1},
    {WeightFormat::q5_0, "q5_0", 8, TensorType::q5_0},
    {WeightFormat::q5_1, "q5_1", 9, TensorType::q5_1},
    {WeightFormat::q2_k, "q2_k", 10, TensorType::q2_K},
    {WeightFormat::q3_k_m, "q3_k_m", 12, TensorType::q3_K},
    {WeightFormat::q4_k_m, "q4_k_m", 15, TensorType::q4_K},
    {WeightFormat::q5_k_m, "q5_k_m", 17, TensorType::q5_K},
    {WeightFormat::iq4_nl, "iq4_nl", 25, TensorType::iq4_nl},
    {WeightFormat::iq4_xs, "iq4_xs", 30, TensorType::iq4_xs},
};

const FormatInfo& info(WeightFormat f) {
  for (const FormatInfo& i : kFormats)
    if (i.format == f) return i;
  throw Error("unknown weight format " + std::to_string(static_cast<int>(f)));
}

bool quantized(TensorType t) { return t != TensorType::f32 && t != TensorType::f16; }

int64_t block_elems(TensorType t) { return tensor_type_info(t).block_elems; }

using Role = TensorRole;

// llama.cpp's use_more_bits: the first and last eighth of the layers and
// every third one between get more bits in Q4_K_M.
bool use_more_bits(int64_t i, int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

class Planner {
 public:
  Planner(const ModelPreset& p, WeightFormat f) : p_(p), format_(f) {}

  void add(std::string name, std::vector<int64_t> shape, Role role, int layer) {
    PlannedTensor t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.layer = layer;
    // LongRoPE's factors divide angles: positive, some near 1, some larger.
    t.mean = role == Role::norm ? 1.0f : role == Role::rope_factors ? kRopeFactorMean : 0.0f;
    t.stddev = role == Role::norm           ? kNormStd
               : role == Role::rope_factors ? kRopeFactorStd
                                            : kWeightStd;
    t.type = choose_type(t, role);
    tensors_.push_back(std::move(t));
  }
  std::vector<PlannedTensor> take() { return std::move(tensors_); }

 private:
  TensorType choose_type(PlannedTensor& t, Role role) const {
    if (t.shape.size() < 2 || role == Role::norm || role == Role::bias || role == Role::router)
      return TensorType::f32;
    TensorType base = info(format_).matrix_type;
    if (!quantized(base)) return base;
    const bool q45km = format_ == WeightFormat::q4_k_m || format_ == WeightFormat::q5_k_m;
    const bool q3km = format_ == WeightFormat::q3_k_m, q2k = format_ == WeightFormat::q2_k;
    const bool iq4 = format_ == WeightFormat::iq4_nl || format_ == WeightFormat::iq4_xs;
    const bool gqa4 = p_.n_head >= 4 * p_.n_head_kv;
    const bool more_bits = use_more_bits(t.layer, p_.n_layer);
    int64_t ne0 = t.shape[0];
    TensorType type = base;
    if (role == Role::output || (role == Role::token_embd && p_.tied_embeddings)) {
      if (ne0 % block_elems(base) != 0)
        type = TensorType::q8_0;
      else if (base != TensorType::q8_0)
        type = TensorType::q6_K;
    } else if (role == Role::attn_v || role == Role::attn_qkv) {  // llama.cpp: qkv is v-like
      if (q45km && more_bits) type = TensorType::q6_K;
      if (q3km) type = t.layer < 2 ? TensorType::q5_K : TensorType::q4_K;
      if (q2k) type = gqa4 ? TensorType::q4_K : TensorType::q3_K;
      if (iq4 && gqa4) type = TensorType::q5_K;
      if (p_.n_expert == 8) type = TensorType::q8_0;
    } else if (role == Role::attn_k) {
      if (p_.n_expert == 8) type = TensorType::q8_0;
    } else if (role == Role::ffn_down) {
      if (q45km && more_bits) type = TensorType::q6_K;
      if (q3km) type = t.layer < p_.n_layer / 16 ? TensorType::q5_K : TensorType::q4_K;
      if (q2k) type = TensorType::q3_K;
      if (iq4 && t.layer < p_.n_layer / 8) type = TensorType::q5_K;  // without an imatrix
    } else if (role == Role::attn_output) {
      if (p_.n_expert == 8) {
        if (format_ == WeightFormat::q4_k_m || q3km || q2k || iq4) type = TensorType::q5_K;
      } else if (q3km) {
        type = TensorType::q4_K;
      } else if (q2k) {
        type = TensorType::q3_K;
      }
    }
    if (ne0 % block_elems(type) == 0) return type;
    // llama.cpp's fallbacks for rows that are not whole blocks.
    std::string why = std::to_string(ne0) + " columns are not a multiple of " +
                      std::to_string(block_elems(type)) + " for " + tensor_type_name(type);
    TensorType fallback = TensorType::f16;
    if (type == TensorType::q6_K) {
      fallback = TensorType::q8_0;
    } else if (type == TensorType::q5_K) {
      fallback = TensorType::q5_1;
    } else if (type == TensorType::q4_K) {
      fallback = TensorType::q5_0;
    } else if (type == TensorType::q3_K || type == TensorType::q2_K) {
      fallback = TensorType::q4_0;
    } else if (type == TensorType::iq4_xs) {
      fallback = TensorType::iq4_nl;
    } else {
      why += "; llama-quantize refuses such rows, its converter writes F16";
    }
    if (ne0 % block_elems(fallback) != 0) fallback = TensorType::f16;
    t.note = (t.note.empty() ? "" : t.note + "; ") + why + ", using " + tensor_type_name(fallback);
    return fallback;
  }

  const ModelPreset& p_;
  WeightFormat format_;
  std::vector<PlannedTensor> tensors_;
};

// ---- random numbers: counter-seeded, the same on every thread count ----

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t s = a ^ (b * 0xD6E8FEB86659FD93ull);
  return splitmix64(&s);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

// Normal(mean, stddev) by Box-Muller on 24-bit uniforms.
void fill_normal(float* x, int64_t n, float mean, float stddev, uint64_t seed) {
  uint64_t state = seed;
  constexpr float kTwoPi = 6.28318530717958647692f;
  for (int64_t i = 0; i < n; i += 2) {
    uint64_t r = splitmix64(&state);
    float u1 = static_cast<float>((r >> 40) + 1) * (1.0f / 16777216.0f);  // (0, 1]
    float u2 = static_cast<float>(r & 0xFFFFFF) * (1.0f / 16777216.0f);   // [0, 1)
    float radius = stddev * std::sqrt(-2.0f * std::log(u1));
    float angle = kTwoPi * u2;
    x[i] = mean + radius * std::cos(angle);
    if (i + 1 < n) x[i + 1] = mean + radius * std::sin(angle);
  }
}

// `rows` rows of the tensor, drawn for chunk number `chunk`, in its storage type.
void encode_rows(const PlannedTensor& t, uint64_t seed, int64_t chunk, int64_t rows,
                 std::vector<float>* scratch, std::vector<uint8_t>* out) {
  int64_t ne0 = t.shape[0], n = rows * ne0;
  scratch->resize(static_cast<size_t>(n));
  fill_normal(scratch->data(), n, t.mean, t.stddev, mix(seed, static_cast<uint64_t>(chunk)));
  out->resize(static_cast<size_t>(ggml_row_bytes(t.type, ne0) * rows));
  ggml_from_f32(t.type, scratch->data(), n, out->data());
}

// Generates the tensor in chunks of whole rows on `threads` threads.
void stream_tensor(const PlannedTensor& t, uint64_t model_seed, int threads,
                   const GgufWriter::ByteSink& sink) {
  const int64_t ne0 = t.shape[0], rows = t.elements() / ne0;
  const int64_t chunk_rows = std::max<int64_t>(1, kChunkElements / ne0);
  const uint64_t seed = mix(model_seed, fnv1a(t.name));
  stream_chunks((rows + chunk_rows - 1) / chunk_rows, threads,
                [&](int64_t chunk, std::vector<uint8_t>* out) {
                  thread_local std::vector<float> scratch;
                  const int64_t r0 = chunk * chunk_rows;
                  encode_rows(t, seed, chunk, std::min(chunk_rows, rows - r0), &scratch, out);
                },
                sink);
}

// ---- tokenizers ----

using Metadata = std::vector<std::pair<std::string, GgufWriter::Value>>;

// GPT-2's bytes_to_unicode(): printable bytes stand for themselves, the
// others for U+0100 upwards in byte order.
bool stands_for_itself(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

std::string byte_token(int b) {
  int cp = b;
  if (!stands_for_itself(b)) {
    cp = 256;
    for (int c = 0; c < b; ++c) cp += !stands_for_itself(c);
  }
  std::string s;
  append_utf8(&s, static_cast<uint32_t>(cp));
  return s;
}

// A byte-level BPE vocabulary that spells any text: the 256 byte tokens (id
// = byte), BOS and EOS, a handful of merges, then "[PADn]" unused tokens up
// to `min_size` as llama.cpp's converter pads vocabularies, cut into words
// by the pre-tokenizer `pre`. Returns its size.
int64_t byte_level_tokenizer(int64_t min_size, const ArchDesc& arch, Metadata* kv) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(byte_token(b));
    types.push_back(static_cast<int32_t>(TokenType::normal));
  }
  const int32_t bos = static_cast<int32_t>(tokens.size());
  tokens.push_back("<|begin_of_text|>");
  tokens.push_back("<|end_of_text|>");
  tokens.insert(tokens.end(), arch.vocab_specials.begin(), arch.vocab_specials.end());
  types.resize(tokens.size(), static_cast<int32_t>(TokenType::control));
  const std::string sp = byte_token(' ');  // "Ġ"
  const std::vector<std::pair<std::string, std::string>> merges = {
      {sp, "t"},  {"h", "e"}, {sp + "t", "he"}, {"i", "n"}, {"e", "r"},
      {"a", "n"}, {"o", "n"}, {sp, "a"},        {"r", "e"}, {sp, "s"},
  };
  std::vector<std::string> merge_texts;
  for (const auto& [l, r] : merges) {
    merge_texts.push_back(l + " " + r);
    tokens.push_back(l + r);
    types.push_back(static_cast<int32_t>(TokenType::normal));
  }
  for (int64_t i = static_cast<int64_t>(tokens.size()); i < min_size; ++i) {
    tokens.push_back("[PAD" + std::to_string(i) + "]");
    types.push_back(static_cast<int32_t>(TokenType::unused));
  }
  kv->emplace_back("tokenizer.ggml.model", GgufWriter::str("gpt2"));
  kv->emplace_back("tokenizer.ggml.pre", GgufWriter::str(arch.tokenizer_pre));
  kv->emplace_back("tokenizer.ggml.tokens", GgufWriter::string_array(tokens));
  kv->emplace_back("tokenizer.ggml.token_type", GgufWriter::array(types));
  kv->emplace_back("tokenizer.ggml.merges", GgufWriter::string_array(merge_texts));
  kv->emplace_back("tokenizer.ggml.bos_token_id", GgufWriter::u32(static_cast<uint32_t>(bos)));
  kv->emplace_back("tokenizer.ggml.eos_token_id", GgufWriter::u32(static_cast<uint32_t>(bos + 1)));
  kv->emplace_back("tokenizer.ggml.add_bos_token", GgufWriter::boolean(true));
  kv->emplace_back("tokenizer.ggml.add_eos_token", GgufWriter::boolean(false));
  return static_cast<int64_t>(tokens.size());
}

// Copies every tokenizer.* key of the file; returns its vocabulary size.
int64_t copy_tokenizer(const std::string& path, Metadata* kv) {
  GgufFile f = GgufFile::open(path);
  int64_t n = static_cast<int64_t>(f.get_string_array("tokenizer.ggml.tokens").size());
  if (n == 0) f.fail("tokenizer.ggml.tokens is empty");
  for (const auto& [key, value] : f.metadata())
    if (key.rfind("tokenizer.", 0) == 0) kv->emplace_back(key, GgufWriter::copy_of(value));
  return n;
}

void check_preset(const ModelPreset& p) {
  auto fail = [&](const std::string& why) {
    throw Error("model preset '" + p.family + "/" + p.preset + "': " + why);
  };
  if (p.n_embd <= 0 || p.n_layer <= 0 || p.n_head <= 0 || p.n_head_kv <= 0 || p.head_dim <= 0 ||
      p.n_ff <= 0 || p.n_ctx <= 0)
    fail("sizes must be positive");
  if (p.n_head % p.n_head_kv != 0)
    fail(std::to_string(p.n_head) + " heads cannot share " + std::to_string(p.n_head_kv) +
         " KV heads");
  if (p.head_dim % 2 != 0) fail("head_dim " + std::to_string(p.head_dim) + " is odd (RoPE pairs)");
  if (p.moe() && (p.n_expert_used <= 0 || p.n_expert_used > p.n_expert))
    fail(std::to_string(p.n_expert_used) + " experts used of " + std::to_string(p.n_expert));
}

}  // namespace

int64_t PlannedTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

WeightFormat parse_weight_format(std::string_view name) {
  std::string known;
  for (const FormatInfo& i : kFormats) {
    if (i.name == name) return i.format;
    known += (known.empty() ? "" : ", ") + std::string(i.name);
  }
  throw Error("unknown weight type '" + std::string(name) + "' (known: " + known + ")");
}

std::string_view weight_format_name(WeightFormat f) { return info(f).name; }

uint32_t llama_file_type(WeightFormat f) { return info(f).file_type; }

std::vector<PlannedTensor> plan_model_tensors(const ModelPreset& p, int64_t n_vocab,
                                              WeightFormat format) {
  check_preset(p);
  if (n_vocab <= 0) throw Error("model preset '" + p.family + "/" + p.preset + "': no vocabulary");
  Planner plan(p, format);
  for (const ArchTensor& t : arch_desc(p.arch).tensor_list(preset_config(p, n_vocab)))
    plan.add(t.name, t.shape, t.role, t.layer);
  return plan.take();
}

GenModelSummary generate_model(const ModelPreset& p, const GenModelOptions& o,
                               const std::string& path) {
  check_preset(p);
  GgufWriter w;
  const std::string& a = p.arch;
  auto u32 = [](int64_t v) { return GgufWriter::u32(static_cast<uint32_t>(v)); };
  w.add("general.architecture", GgufWriter::str(a));
  w.add("general.type", GgufWriter::str("model"));
  w.add("general.name", GgufWriter::str(p.name));
  w.add("general.description", GgufWriter::str("random weights (seed " + std::to_string(o.seed) +
                                               ") written by kiln gen-model; not a trained model"));
  // The tokenizer decides the vocabulary size, so it is built first and its
  // keys are added after the architecture's, as llama.cpp's converter orders them.
  Metadata tokenizer;
  int64_t n_vocab = o.vocab_path.empty() ? byte_level_tokenizer(p.n_vocab, arch_desc(a), &tokenizer)
                                         : copy_tokenizer(o.vocab_path, &tokenizer);
  w.add(a + ".vocab_size", u32(n_vocab));
  w.add(a + ".context_length", u32(p.n_ctx));
  w.add(a + ".embedding_length", u32(p.n_embd));
  w.add(a + ".block_count", u32(p.n_layer));
  w.add(a + ".feed_forward_length", u32(p.n_ff));
  w.add(a + ".attention.head_count", u32(p.n_head));
  w.add(a + ".attention.head_count_kv", u32(p.n_head_kv));
  w.add(a + ".rope.freq_base", GgufWriter::f32(p.rope_base));
  w.add(a + ".attention.layer_norm_rms_epsilon", GgufWriter::f32(p.rms_eps));
  w.add(a + ".rope.dimension_count", u32(p.head_dim));
  if (p.explicit_head_dim || p.head_dim * p.n_head != p.n_embd) {
    w.add(a + ".attention.key_length", u32(p.head_dim));
    w.add(a + ".attention.value_length", u32(p.head_dim));
  }
  if (p.sliding_window) w.add(a + ".attention.sliding_window", u32(p.sliding_window));
  if (p.yarn_factor > 0) {
    w.add(a + ".rope.scaling.type", GgufWriter::str("yarn"));
    w.add(a + ".rope.scaling.factor", GgufWriter::f32(p.yarn_factor));
    w.add(a + ".rope.scaling.original_context_length", u32(p.yarn_orig_ctx));
  }
  if (p.longrope_orig_ctx > 0) {
    // As llama.cpp's converter: cos and sin scaled by sqrt(1 + ln(scale) /
    // ln(original context)), scale the context's growth.
    const double orig = static_cast<double>(p.longrope_orig_ctx);
    const double scale = static_cast<double>(p.n_ctx) / orig;
    const double attn = scale > 1 ? std::sqrt(1 + std::log(scale) / std::log(orig)) : 1.0;
    w.add(a + ".rope.scaling.original_context_length", u32(p.longrope_orig_ctx));
    w.add(a + ".rope.scaling.attn_factor", GgufWriter::f32(static_cast<float>(attn)));
  }
  if (p.moe()) {
    w.add(a + ".expert_count", u32(p.n_expert));
    w.add(a + ".expert_used_count", u32(p.n_expert_used));
    if (p.n_ff_exp) w.add(a + ".expert_feed_forward_length", u32(p.n_ff_exp));
  }
  w.add("general.file_type", GgufWriter::u32(llama_file_type(o.format)));
  w.add("general.quantization_version", GgufWriter::u32(kQuantVersion));
  for (auto& [key, value] : tokenizer) w.add(key, std::move(value));

  GenModelSummary s;
  s.n_vocab = n_vocab;
  s.tensors = plan_model_tensors(p, n_vocab, o.format);
  int threads = o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  for (const PlannedTensor& t : s.tensors) {
    s.params += t.elements();
    w.add_tensor(t.name, t.type, t.shape, [&t, &o, threads](const GgufWriter::ByteSink& sink) {
      stream_tensor(t, o.seed, threads, sink);
    });
  }

  const std::string partial = path + ".partial";
  try {
    w.write(partial);
    std::filesystem::rename(partial, path);
  } catch (const std::filesystem::filesystem_error& e) {
    std::error_code ignored;
    std::filesystem::remove(partial, ignored);
    throw Error("cannot write model file '" + path + "': " + e.code().message());
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(partial, ignored);
    throw;
  }
  s.file_bytes = std::filesystem::file_size(path);
  return s;
}

}  // namespace kiln
