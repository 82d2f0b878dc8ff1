// Model forwards on generated tiny models of every architecture and weight
// format (byte-level vocabulary, so nothing outside the repository is read):
// - the JIT forward against the same plan replayed through the reference
//   interpreter (every kernel of the model checked in place). Tolerance: the
//   two run the same f32 operations except for reassociated reductions
//   (row sums, dot products), 1e-3 of the logits' spread after two layers;
// - prefill of n tokens against prefill of n-1 then one decode step (the
//   decode kernels and the KV cache against the prefill ones), same bound
//   plus the different activation-quantisation order: 2e-3 of the spread;
// - bad input: token ids outside the vocabulary, a full context.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "models/generation.h"
#include "models/llm.h"
#include "models/model_generator.h"
#include "support/runtime_fixture.h"

using namespace kiln;

namespace {

std::string tiny_model(const std::string& family, WeightFormat format) {
  auto dir = std::filesystem::temp_directory_path() / "kiln-test-llm";
  std::filesystem::create_directories(dir);
  std::string path =
      (dir / (family + "-" + std::string(weight_format_name(format)) + ".gguf")).string();
  if (!std::filesystem::exists(path)) {
    GenModelOptions o;
    o.format = format;
    o.seed = 3;
    generate_model(find_model_preset(family, "tiny"), o, path);
  }
  return path;
}

double spread(const std::vector<float>& v) {
  double m = 0, s = 0;
  for (float x : v) m += x;
  m /= static_cast<double>(v.size());
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(std::isfinite(a[i]));
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return d;
}

}  // namespace

TEST_CASE("model forwards match the interpreter and decode matches prefill", "[models][llm]") {
  const std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111, 44, 32, 119};
  for (const char* family : {"llama", "qwen2", "qwen3", "qwen3moe", "llama-moe"})
    for (WeightFormat format : {WeightFormat::f16, WeightFormat::q8_0, WeightFormat::q4_k_m}) {
      INFO(family << " " << weight_format_name(format));
      std::string path = tiny_model(family, format);
      Llm jit(path, test::runtime(), 64), ref(path, test::runtime(), 64);
      std::vector<float> a = jit.forward(prompt, true);
      std::vector<float> b = ref.forward(prompt, true, /*interpret=*/true);
      double s = spread(b);
      CHECK(s > 0);
      CHECK(max_diff(a, b) <= 1e-3 * s);
      // The last position again, as a decode step after the rest.
      Llm split(path, test::runtime(), 64);
      split.forward(std::vector<int32_t>(prompt.begin(), prompt.end() - 1));
      std::vector<float> last = split.forward({prompt.back()});
      std::vector<float> want(a.end() - static_cast<long>(last.size()), a.end());
      CHECK(max_diff(last, want) <= 2e-3 * s);
    }
}

TEST_CASE("model forwards reject bad tokens and a full context", "[models][llm][error]") {
  Llm m(tiny_model("llama", WeightFormat::f16), test::runtime(), 8);
  REQUIRE_THROWS_WITH(m.forward({1, 100000}), Catch::Contains("outside the vocabulary"));
  REQUIRE_THROWS_WITH(m.forward({}), Catch::Contains("no tokens"));
  m.forward({1, 2, 3, 4, 5, 6});
  REQUIRE_THROWS_WITH(m.forward({1, 2, 3}), Catch::Contains("exceed the context of 8"));
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
