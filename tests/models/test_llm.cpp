// Model forwards on generated tiny models of every architecture and weight
// format (byte-level vocabulary, so nothing outside the repository is read):
// - the JIT forward against the same plan replayed through the reference
//   interpreter (every kernel of the model checked in place);
// - prefill of n tokens against prefill of n-1 then one decode step (the
//   decode kernels and the KV cache against the prefill ones).
// Tolerance, relative to the logits' spread s: F16 models run the same f32
// operations except for reassociated reductions (row sums, dots): 1e-3 s
// after two layers (2e-3 s for decode vs prefill, whose GEMV and GEMM sum
// in different orders). Models with quantized weights also quantise their
// activations to 8 bits, which makes the comparison discontinuous: a
// reassociation that moves an activation across a rounding boundary changes
// one 8-bit value by a step (1/127 of its block's largest value), which two
// layers carry to a few percent of s, and the nearly flat logits of these
// random models can then swap their top token. There: max 1e-1 s, mean
// 1e-2 s, and the same top-1 token at 8 of the 9 positions (F16: all).
// - bad input: token ids outside the vocabulary, a full context.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "kernels/attention/kv_cache.h"
#include "models/generation.h"
#include "models/kld.h"
#include "models/llm.h"
#include "models/model_generator.h"
#include "support/runtime_fixture.h"
#include "support/temp_dir.h"
#include "support/test_data.h"
#include "support/tiny_model.h"

using namespace kiln;

namespace {

std::string tiny_model(const std::string& family, WeightFormat format) {
  return test::tiny_model(family, format, 3);
}

using test::spread;

// Logits [positions, V]: finite, max and mean |a - b| within max_tol and
// mean_tol times the spread s, and the same top-1 token at every position.
void compare(const std::vector<float>& a, const std::vector<float>& b, int64_t V, double s,
             double max_tol, double mean_tol, size_t max_top1_misses) {
  REQUIRE(a.size() == b.size());
  double worst = 0, total = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(std::isfinite(a[i]));
    double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    worst = kiln::test::worse(worst, d);
    total += d;
  }
  CHECK(worst <= max_tol * s);
  CHECK(total / static_cast<double>(a.size()) <= mean_tol * s);
  size_t misses = 0;
  for (size_t row = 0; row < a.size() / V; ++row) {
    auto top = [&](const std::vector<float>& v) {
      return std::max_element(v.begin() + row * V, v.begin() + (row + 1) * V) - v.begin();
    };
    misses += top(a) != top(b);
  }
  CHECK(misses <= max_top1_misses);
}

// A prompt's every logit against the interpreter, then its last position
// again as a decode step after the rest.
void check_forward(const char* family, WeightFormat format, KvCacheType kv = DType::f16,
                   const std::string& model = "") {
  const std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111, 44, 32, 119};
  INFO(family << " " << weight_format_name(format) << " KV cache " << kv_cache_type_name(kv));
  std::string path = model.empty() ? tiny_model(family, format) : model;
  Llm jit(path, test::runtime(), 64, kv), ref(path, test::runtime(), 64, kv);
  std::vector<float> a = jit.forward(prompt, true);
  std::vector<float> b = ref.forward(prompt, true, /*interpret=*/true);
  double s = spread(b);
  CHECK(s > 0);
  // An AURA code is a threshold compare of a rotated coordinate: a
  // reassociated sum that moves one across a threshold moves the code by a
  // step, a discontinuity like an 8-bit activation's.
  bool quantized = format != WeightFormat::f16 || is_aura_kv(kv.dtype);
  compare(a, b, jit.config().n_vocab, s, quantized ? 1e-1 : 1e-3, quantized ? 1e-2 : 1e-3,
          quantized ? 1 : 0);
  Llm split(path, test::runtime(), 64, kv);
  split.forward(std::vector<int32_t>(prompt.begin(), prompt.end() - 1));
  std::vector<float> last = split.forward({prompt.back()});
  std::vector<float> want(a.end() - static_cast<long>(last.size()), a.end());
  compare(last, want, jit.config().n_vocab, s, quantized ? 1e-1 : 2e-3, quantized ? 1e-2 : 2e-3, 0);
}

}  // namespace

TEST_CASE("model forwards match the interpreter and decode matches prefill", "[models][llm]") {
  for (const char* family :
       {"llama", "qwen2", "qwen3", "qwen3moe", "llama-moe", "gemma3", "gpt-oss"})
    for (WeightFormat format : {WeightFormat::f16, WeightFormat::q8_0, WeightFormat::q4_k_m})
      check_forward(family, format);
}

TEST_CASE("models over a q8_0 KV cache match the interpreter", "[models][llm]") {
  // Both round their cache rows with kv_cache_store. A reassociated key or
  // value that crosses a rounding boundary moves one code by a step (1/127
  // of its 32-element block's largest value), which attention averages
  // over the positions: within the f16 cache's tolerances.
  for (const char* family : {"llama", "qwen3", "gemma3"})
    check_forward(family, WeightFormat::f16, DType::i8);
}

TEST_CASE("models over an AURA KV cache match the interpreter, and decode matches prefill",
          "[models][llm][aura]") {
  // Every attention shape the architectures have: head size 64 (llama,
  // gpt-oss with sinks and a window) and 128 (qwen3, gemma3's windowed
  // layers), and a head size of 96 that the cache pads to 128.
  check_forward("llama", WeightFormat::f16, AuraScheme{4, 4});
  check_forward("qwen3", WeightFormat::q8_0, AuraScheme{8, 4});
  check_forward("gemma3", WeightFormat::f16, AuraScheme{3, 3});
  check_forward("gpt-oss", WeightFormat::q8_0, AuraScheme{4, 2});
  static const test::TempDir dir("kiln-test-llm-aura");
  ModelPreset p = find_model_preset("qwen3", "tiny");
  p.head_dim = 96;
  GenModelOptions o;
  o.seed = 4;
  const std::string padded = dir.path("qwen3-d96.gguf");
  generate_model(p, o, padded);
  check_forward("qwen3", WeightFormat::f16, AuraScheme{2, 8}, padded);
}

TEST_CASE("an AURA cache's logits approach the f16 cache's with more bits", "[models][llm][aura]") {
  // KL divergence from the f16 cache's next-token distributions over a
  // 40-token prompt: small, and ordered by bits (these random models'
  // attention is nearly uniform, so the values are small in absolute terms).
  std::string path = tiny_model("qwen3", WeightFormat::f16);
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 40; ++i) prompt.push_back(3 + (i * 53) % 250);
  std::vector<float> base = Llm(path, test::runtime(), 64).forward(prompt, true);
  const int64_t V = Llm(path, test::runtime(), 8).config().n_vocab;
  std::map<std::string, double> kld;
  for (const char* scheme : {"aura8v8", "aura4v4", "aura2v2"}) {
    Llm m(path, test::runtime(), 64, parse_aura_scheme(scheme));
    std::vector<float> t = m.forward(prompt, true);
    KldAccumulator acc;
    for (size_t i = 0; i < prompt.size(); ++i)
      acc.add(base.data() + i * V, t.data() + i * V, V, -1);
    kld[scheme] = acc.finish().mean_kld;
    INFO(scheme << " mean KLD " << kld[scheme]);
    CHECK(kld[scheme] > 0);
    CHECK(kld[scheme] < 0.05);
  }
  CHECK(kld["aura8v8"] < kld["aura4v4"]);
  CHECK(kld["aura4v4"] < kld["aura2v2"]);
}

TEST_CASE("AURA caches: sizes, the auto-asymmetric rule and bad settings", "[models][llm][aura]") {
  std::string path = tiny_model("llama", WeightFormat::f16);
  Llm f16(path, test::runtime(), 256), aura(path, test::runtime(), 256, AuraScheme{4, 4});
  const ModelConfig& c = f16.config();
  // Codes and f16 norms of every layer (AURA.md section 7), against f16 rows.
  CHECK(
      aura.kv_cache_bytes() ==
      static_cast<size_t>(c.n_layer * 256 * aura_bytes_per_token(c.n_head_kv, c.head_dim, {4, 4})));
  CHECK(kv_cache_type_name(aura.kv_type()) == "aura4v4");
  // GQA group 2: the opt-in rule leaves it; a group of 6 takes K to 8 bits.
  setenv("KILN_AURA_AUTO_ASYM", "1", 1);
  CHECK(kv_cache_type_name(Llm(path, test::runtime(), 64, AuraScheme{4, 2}).kv_type()) ==
        "aura4v2");
  static const test::TempDir dir("kiln-test-llm-aura-asym");
  ModelPreset p = find_model_preset("llama", "tiny");
  p.n_head = 12;
  p.n_head_kv = 2;
  p.head_dim = 64;
  p.explicit_head_dim = true;
  const std::string g6 = dir.path("llama-g6.gguf");
  generate_model(p, GenModelOptions{}, g6);
  CHECK(kv_cache_type_name(Llm(g6, test::runtime(), 64, AuraScheme{4, 2}).kv_type()) == "aura8v2");
  unsetenv("KILN_AURA_AUTO_ASYM");
  CHECK(kv_cache_type_name(Llm(g6, test::runtime(), 64, AuraScheme{4, 2}).kv_type()) == "aura4v2");
  CHECK_THROWS_WITH(Llm(path, test::runtime(), 64, AuraScheme{4, 4}, 16),
                    Catch::Contains("aura4v4: an AURA cache cannot be paged"));
  CHECK_THROWS_WITH(parse_kv_cache_type("aura5v4"), Catch::Contains("AURA scheme 'aura5v4'"));
  CHECK_THROWS_WITH(parse_kv_cache_type("u32"), Catch::Contains("KV cache type 'u32'"));
}

TEST_CASE("Q4_1, Q5_0 and Q5_1 model forwards match the interpreter", "[models][llm]") {
  for (WeightFormat format : {WeightFormat::q4_1, WeightFormat::q5_0, WeightFormat::q5_1})
    check_forward("llama", format);
}

TEST_CASE("model forwards reject bad tokens and a full context", "[models][llm][error]") {
  Llm m(tiny_model("llama", WeightFormat::f16), test::runtime(), 8);
  REQUIRE_THROWS_WITH(m.forward({1, 100000}), Catch::Contains("outside the vocabulary"));
  REQUIRE_THROWS_WITH(m.forward({}), Catch::Contains("no tokens"));
  m.forward({1, 2, 3, 4, 5, 6});
  REQUIRE_THROWS_WITH(m.forward({1, 2, 3}), Catch::Contains("exceed the context of 8"));
}

TEST_CASE("gemma3 reads its window, rope bases and scale", "[models][llm]") {
  std::string path = tiny_model("gemma3", WeightFormat::f16);
  Llm m(path, test::runtime());
  const ModelConfig& c = m.config();
  CHECK(c.sliding_window == 512);
  CHECK(m.n_ctx() == 2048);  // the training context: windowed layers need no cap
  for (int64_t l = 0; l < c.n_layer; ++l) {
    INFO("layer " << l);
    CHECK(c.sliding(l) == (l != 5));  // every 6th layer is global
    CHECK(c.rope_base_for(l) == (l == 5 ? 1e6 : 1e4));
  }
  CHECK(c.attn_scale == 1.0 / std::sqrt(128.0));
  CHECK(c.qk_norm);
  CHECK(c.rope_neox);
}

TEST_CASE("gemma3 past its sliding window matches the interpreter, and decode matches prefill",
          "[models][llm]") {
  // A window of 8 positions under a 30-token prompt: the windowed layers'
  // prefill and decode kernels mask by window, the global layer does not.
  static const test::TempDir dir("kiln-test-llm-window");
  std::string path = dir.path("gemma3-window.gguf");
  ModelPreset p = find_model_preset("gemma3", "tiny");
  p.sliding_window = 8;
  GenModelOptions o;
  o.seed = 5;
  generate_model(p, o, path);
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 30; ++i) prompt.push_back(3 + (i * 37) % 250);
  Llm jit(path, test::runtime(), 64), ref(path, test::runtime(), 64);
  REQUIRE(jit.config().sliding_window == 8);
  std::vector<float> a = jit.forward(prompt, true);
  std::vector<float> b = ref.forward(prompt, true, /*interpret=*/true);
  const int64_t V = jit.config().n_vocab;
  double s = spread(b);
  compare(a, b, V, s, 1e-3, 1e-3, 0);
  Llm split(path, test::runtime(), 64);
  split.forward(std::vector<int32_t>(prompt.begin(), prompt.end() - 1));
  std::vector<float> last = split.forward({prompt.back()});
  compare(last, std::vector<float>(a.end() - V, a.end()), V, s, 2e-3, 2e-3, 0);
  // The same weights with a window wider than the prompt: the last
  // position's logits move by far more than the tolerance, so the test
  // sees the mask.
  p.sliding_window = 512;
  std::string wide = dir.path("gemma3-wide.gguf");
  generate_model(p, o, wide);
  std::vector<float> c = Llm(wide, test::runtime(), 64).forward(prompt);
  double moved = 0;
  for (int64_t i = 0; i < V; ++i)
    moved = std::max(moved, std::fabs(static_cast<double>(c[i]) - last[i]));
  CHECK(moved > 0.05 * s);
}

TEST_CASE("a paged KV cache gives the contiguous cache's logits", "[models][llm]") {
  // The same kernels over the same rows, addressed through a block table:
  // prefill, then decode steps crossing pages, bit for bit.
  std::string path = tiny_model("llama", WeightFormat::q8_0);
  Llm flat(path, test::runtime(), 64), paged(path, test::runtime(), 64, DType::f16, 16);
  std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33};
  CHECK(flat.forward(prompt, true) == paged.forward(prompt, true));
  for (int32_t t = 0; t < 6; ++t) CHECK(flat.forward({40 + t}) == paged.forward({40 + t}));
  Llm flat8(path, test::runtime(), 64, DType::i8), paged8(path, test::runtime(), 64, DType::i8, 16);
  CHECK(flat8.forward(prompt, true) == paged8.forward(prompt, true));
  for (int32_t t = 0; t < 6; ++t) CHECK(flat8.forward({40 + t}) == paged8.forward({40 + t}));
  CHECK_THROWS_WITH(Llm(path, test::runtime(), 64, DType::f16, 12),
                    Catch::Contains("KV page of 12 rows: must be a multiple of"));
}

TEST_CASE("greedy generation is deterministic and stops on stop strings", "[models][llm]") {
  std::string path = tiny_model("qwen3", WeightFormat::q8_0);
  Llm a(path, test::runtime(), 64), b(path, test::runtime(), 64);
  GenerationOptions o;
  o.n_predict = 6;
  o.stop_at_eos = false;
  GenerationResult ra = generate(a, {1, 2, 3}, o), rb = generate(b, {1, 2, 3}, o);
  CHECK(ra.generated == rb.generated);
  CHECK(ra.generated.size() == 6);
  // Sampling with a seed repeats too.
  o.sampler.temperature = 0.8;
  o.sampler.seed = 42;
  a.reset();
  b.reset();
  CHECK(generate(a, {1, 2, 3}, o).generated == generate(b, {1, 2, 3}, o).generated);
  // A stop string made of the first generated text ends generation there.
  a.reset();
  o.sampler.temperature = 0;
  std::string first = a.tokenizer().token_to_piece(ra.generated[0]);
  if (!first.empty()) {
    o.stop = {first};
    a.reset();
    GenerationResult rs = generate(a, {1, 2, 3}, o);
    CHECK(rs.stop_reason == "stop string");
    CHECK(rs.text.empty());
  }
}

TEST_CASE("a prompt continuing cached tokens generates as a fresh run", "[models][llm]") {
  // A server's next request sharing the last one's first tokens: the model
  // rewinds to them and prefills only the rest.
  std::string path = tiny_model("qwen3", WeightFormat::q8_0);
  Llm warm(path, test::runtime(), 64), fresh(path, test::runtime(), 64);
  GenerationOptions o;
  o.n_predict = 5;
  o.stop_at_eos = false;
  o.all_logits = true;
  const std::vector<int32_t> first = {1, 5, 9, 13, 17, 21, 2}, second = {1, 5, 9, 13, 17, 40, 41};
  generate(warm, first, o);
  warm.rewind(5);
  o.cached = 5;
  GenerationResult w = generate(warm, second, o);
  o.cached = 0;
  GenerationResult f = generate(fresh, second, o);
  CHECK(w.generated == f.generated);
  CHECK(w.prompt == second);
  // Logits of the positions after the cached ones: the fresh run's rows 5...
  const int64_t V = fresh.config().n_vocab;
  REQUIRE(w.logits.size() + 5 * static_cast<size_t>(V) == f.logits.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < w.logits.size(); ++i) {
    worst =
        kiln::test::worse(worst, std::fabs(static_cast<double>(w.logits[i]) - f.logits[i + 5 * V]));
    scale = std::max(scale, std::fabs(static_cast<double>(f.logits[i + 5 * V])));
  }
  CHECK(worst <= 1e-4 * scale);
  CHECK_THROWS_WITH(warm.rewind(warm.pos() + 1), Catch::Contains("is not in 0 .."));
  o.cached = 3;  // the cache does not hold 3 tokens
  warm.reset();
  CHECK_THROWS_WITH(generate(warm, second, o), Catch::Contains("3 cached prompt tokens"));
}

TEST_CASE("a decode step over more than one 512-key slice matches prefill", "[models][llm]") {
  // ctx 1024 puts decode on split-K attention (ops::attention), and 700
  // cached tokens give it two slices, the second partial; for each KV
  // cache dtype (prefill and decode read the same rounded cache).
  std::string path = tiny_model("llama", WeightFormat::f16);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 701; ++i) prompt.push_back(1 + (i * 37) % 250);
  for (KvCacheType kv : {KvCacheType(DType::f16), KvCacheType(DType::bf16), KvCacheType(DType::f32),
                         KvCacheType(DType::i8), KvCacheType(AuraScheme{4, 4})}) {
    INFO("KV cache " << kv_cache_type_name(kv));
    Llm whole(path, test::runtime(), 1024, kv), split(path, test::runtime(), 1024, kv);
    std::vector<float> a = whole.forward(prompt, true);
    split.forward(std::vector<int32_t>(prompt.begin(), prompt.end() - 1));
    std::vector<float> last = split.forward({prompt.back()});
    std::vector<float> want(a.end() - static_cast<long>(last.size()), a.end());
    compare(last, want, whole.config().n_vocab, spread(want), 2e-3, 2e-3, 0);
  }
}

TEST_CASE("a KV cache dtype without kernels is refused", "[models][llm][error]") {
  CHECK_THROWS_WITH(Llm(tiny_model("llama", WeightFormat::f16), test::runtime(), 64, DType::u8),
                    Catch::Contains("KV cache dtype u8 is not supported"));
}

TEST_CASE("MoE forwards are bitwise identical on 1 to 3 threads", "[models][llm][moe]") {
  // Every program's arithmetic is fixed by the plan, and the expert
  // combine gathers each token's rows in slot order: threads only decide
  // which core runs a program.
  for (const char* family : {"qwen3moe", "gpt-oss"}) {
    INFO(family);
    const std::string path = tiny_model(family, WeightFormat::q8_0);
    const std::vector<int32_t> prompt = {1, 40, 2, 77, 9, 123, 5, 31, 200};
    std::vector<std::vector<float>> out;
    for (int threads : {1, 2, 3}) {
      Runtime rt(RuntimeOptions{threads, test::cache_dir(), false});
      Llm m(path, rt, 32);
      std::vector<float> prefill = m.forward(prompt, true);
      std::vector<float> step = m.forward({17});
      prefill.insert(prefill.end(), step.begin(), step.end());
      out.push_back(prefill);
    }
    CHECK(out[0] == out[1]);
    CHECK(out[0] == out[2]);
  }
}
