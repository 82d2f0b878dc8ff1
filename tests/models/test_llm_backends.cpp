// One model, every backend: tiny llama, qwen3moe and gpt-oss (MoE routing, expert
// gathers and the weighted combine all kernels of the plan) and gemma3, F16,
// run on the cpu backend (JIT), on cuda-sim (the CUDA C of every kernel on
// the CPU simulator), on a GPU when there is one, and through the reference
// interpreter (the cpu's plan).
//
// The cpu runs the interpreter's plan: the same f32 operations except
// reassociated reductions, so max |d| <= 1e-3 of the logits' spread and the
// same top-1 token at every position. The GPU's kernel policy runs another
// plan on purpose (ggml's rows for qgemv, prompt attention as tile dots with
// q and its weights rounded to the cache's f16), so cuda-sim checks every
// launch against the interpreter on that launch's own inputs (Runtime's
// check mode: the codegen is judged kernel by kernel) and the end-to-end
// logits within the rounding its plan adds: max |d| <= 5e-3 of the spread
// for F16 weights (observed 3e-4 to 1.2e-3) and 0.1 where 8-bit activations
// turn a rounding one ulp off into a step of their scale (observed 0.023 to
// 0.053), the same top-1 token everywhere. Also the errors of plans and
// bindings.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <set>

#include "ir/error.h"
#include "models/llm.h"
#include "models/model_generator.h"
#include "runtime/plan.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"
#include "support/tiny_model.h"

using namespace kiln;

namespace {

std::string tiny_model(const std::string& family, WeightFormat format = WeightFormat::f16) {
  return test::tiny_model(family, format, 5);
}

Runtime& sim_runtime() {
  static Runtime rt(RuntimeOptions{2, test::cache_dir(), false, "cuda-sim", true});
  return rt;
}

struct Agreement {
  double max_rel = 0;  // max |a - b| / spread(b)
  size_t top1_misses = 0;
};

Agreement agree(const std::vector<float>& a, const std::vector<float>& b, int64_t V) {
  REQUIRE(a.size() == b.size());
  double m = 0, s = 0, worst = 0;
  for (float x : b) m += x;
  m /= static_cast<double>(b.size());
  for (float x : b) s += (x - m) * (x - m);
  s = std::sqrt(s / static_cast<double>(b.size()));
  REQUIRE(s > 0);
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(std::isfinite(a[i]));
    worst = kiln::test::worse(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  Agreement r{worst / s, 0};
  for (size_t row = 0; row < a.size() / V; ++row) {
    auto top = [&](const std::vector<float>& v) {
      return std::max_element(v.begin() + row * V, v.begin() + (row + 1) * V) - v.begin();
    };
    r.top1_misses += top(a) != top(b);
  }
  return r;
}

// Prefill of a short prompt with every position's logits, then one decode
// step, on each runtime against the interpreter.
void check_against_interpreter(const std::string& family, std::initializer_list<Runtime*> rts,
                               WeightFormat format = WeightFormat::f16) {
  const std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111, 44};
  INFO(family << " " << weight_format_name(format));
  std::string path = tiny_model(family, format);
  Llm ref(path, test::runtime(), 32);
  std::vector<float> want = ref.forward(prompt, true, /*interpret=*/true);
  std::vector<float> want_step = ref.forward({7}, false, /*interpret=*/true);
  const int64_t V = ref.config().n_vocab;
  for (Runtime* rt : rts) {
    INFO("backend " << rt->backend().name());
    Llm m(path, *rt, 32);
    const bool same_plan = &rt->backend().policy() == &test::runtime().backend().policy();
    const double bound = same_plan ? 1e-3 : format == WeightFormat::f16 ? 5e-3 : 0.1;
    std::vector<float> got = m.forward(prompt, true);
    Agreement a = agree(got, want, V);
    CHECK(a.max_rel <= bound);
    CHECK(a.top1_misses == 0);
    Agreement d = agree(m.forward({7}), want_step, V);
    CHECK(d.max_rel <= bound);
    CHECK(d.top1_misses == 0);
  }
}

}  // namespace

// CI runs llama, a dense model (the simulator's kernels each against the
// interpreter: tests/kernels/test_cuda_library.cpp); `test_models "[long]"`
// adds the MoE and windowed architectures, whose simulator builds take as
// long again each.
TEST_CASE("cpu, cuda-sim and the interpreter run the same forward", "[models][llm][backend]") {
  check_against_interpreter("llama", {&test::runtime(), &sim_runtime()});
}

TEST_CASE("cpu, cuda-sim and the interpreter run the same forward on every architecture",
          "[models][llm][backend][.long]") {
  for (const char* family : {"qwen3moe", "gemma3", "gpt-oss"})
    check_against_interpreter(family, {&test::runtime(), &sim_runtime()});
}

// Each backend's kernel policy lays quantized weights out its own way: the
// cpu (and the interpreter's reference, recorded on it) interleaves them
// across 16 rows for qgemv_rows16, cuda-sim keeps ggml's rows for qgemv.
TEST_CASE("quantized forwards agree across the backends' weight layouts",
          "[models][llm][backend][policy]") {
  check_against_interpreter("llama", {&test::runtime(), &sim_runtime()}, WeightFormat::q4_k_m);
}

TEST_CASE("quantized expert forwards agree across the backends' weight layouts",
          "[models][llm][backend][policy][.long]") {
  check_against_interpreter("qwen3moe", {&sim_runtime()}, WeightFormat::q8_0);
}

TEST_CASE("model forwards on the GPU match the interpreter", "[models][llm][backend][gpu]") {
  std::unique_ptr<Runtime> gpu;
  try {
    gpu = std::make_unique<Runtime>(RuntimeOptions{2, "", false, "cuda"});
  } catch (const Error& e) {
    WARN("skipped: " << e.what());
    return;
  }
  for (const char* family : {"llama", "qwen3moe", "gemma3", "gpt-oss"})
    check_against_interpreter(family, {gpu.get()});
}

TEST_CASE("plans refuse another runtime, unbound and unknown parameters",
          "[runtime][plan][error]") {
  Runtime& rt = test::runtime();
  std::vector<float> x(64, 1.0f), y(64), z(64);
  auto args = [&](int64_t n) {
    return Plan::Args{{"x", Arg::buffer(x.data(), n)},
                      {"y", Arg::buffer(y.data(), n)},
                      {"z", Arg::buffer(z.data(), n)},
                      {"n", Arg::scalar_int(64)}};
  };
  Plan p(rt);
  p.launch("add", "add", {{"T", DType::f32}}, args(64));
  p.run(rt);
  CHECK(z[63] == 1.0f);
  REQUIRE_THROWS_WITH(p.run(sim_runtime()), Catch::Contains("recorded on backend 'cpu'") &&
                                                Catch::Contains("backend 'cuda-sim'"));
  Plan::Args missing = args(64);
  missing.erase("y");
  REQUIRE_THROWS_WITH(p.launch("add", "add", {{"T", DType::f32}}, missing),
                      Catch::Contains("kernel 'add'") && Catch::Contains("parameter 'y'") &&
                          Catch::Contains("not bound"));
  Plan::Args unknown = args(64);
  unknown["w"] = Arg::scalar_int(1);
  REQUIRE_THROWS_WITH(
      p.launch("add", "add", {{"T", DType::f32}}, unknown),
      Catch::Contains("kernel 'add' has no parameter 'w'") && Catch::Contains("x, y, z, n"));
  REQUIRE_THROWS_WITH(p.launch("add", "add", {{"T", DType::f32}}, args(32)),
                      Catch::Contains("buffer 'x' holds 32 elements, the launch needs 64"));
}

TEST_CASE("the cuda backend says in one line why there is no GPU", "[runtime][backend][error]") {
  ThreadPool pool(1);
  std::unique_ptr<Backend> b;
  try {
    b = make_backend("cuda", pool);
  } catch (const Error& e) {
    std::string why = e.what();
    CHECK_FALSE(why.empty());
    CHECK(why.find('\n') == std::string::npos);
    return;
  }
  // A GPU is present: a host buffer handed to it is refused by name.
  Runtime rt(RuntimeOptions{1, "", false, "cuda"});
  std::vector<float> x(64);
  Plan p(rt);
  REQUIRE_THROWS_WITH(p.launch("fill", "fill", {{"T", DType::f32}},
                               {{"x", Arg::buffer(x.data(), 64)},
                                {"n", Arg::scalar_int(64)},
                                {"value", Arg::scalar_float(1)}}),
                      Catch::Contains("buffer 'x'") && Catch::Contains("not memory of the cuda"));
}

// What `kiln inspect --model` reads: the plan a backend would record, as its
// kernel policy picks the kernels, with nothing compiled.
TEST_CASE("plan specs follow the backend's kernel policy without compiling",
          "[models][llm][policy]") {
  const std::string path = tiny_model("llama", WeightFormat::q4_k_m);
  auto kernels = [&](Runtime& rt, int64_t n) {
    Llm m(path, rt, 32);
    std::set<std::string> names;
    for (const Spec& s : m.plan_specs(n)) names.insert(s.kernel);
    return names;
  };
  Runtime sim(RuntimeOptions{1, "", false, "cuda-sim"});
  for (int64_t n : {1, 7}) {
    INFO(n << " tokens");
    const std::set<std::string> gpu = kernels(sim, n), cpu = kernels(test::runtime(), n);
    CHECK(gpu.count("qgemv"));
    CHECK_FALSE(gpu.count("qgemv_rows16"));
    CHECK(cpu.count("qgemv_rows16"));
    CHECK(gpu.count(n == 1 ? "attention_decode_tiles" : "attention_prefill_tiles"));
    CHECK(gpu.count("attention_decode_merge") == (n == 1));
    CHECK(cpu.count(n == 1 ? "attention_decode" : "attention_prefill"));
  }
  CHECK(sim.compile_stats().kernels == 0);
  Llm m(path, sim, 32);
  REQUIRE_THROWS_WITH(m.plan_specs(33), Catch::Contains("33 tokens for a context of 32"));
}

// A prompt's MoE tiles follow the policy: on the cpu tiles of 4 through
// qgemv (16 tokens per expert at 64 tokens); on the cuda policy tiles of 16
// through qgemm_tiles at 64 tokens, and at 24 tokens (6 per expert, below
// one mma tile) qgemv's tiles bounded by the token block it allows Q2_K (2:
// 4 spilled in ptxas).
TEST_CASE("MoE tiles are bounded by the policy's token blocks", "[models][llm][policy]") {
  const std::string path = tiny_model("qwen3moe", WeightFormat::q2_k);
  auto grouped_q2k_tiles = [&](Runtime& rt, int64_t tokens) {
    Llm m(path, rt, 64);
    std::set<std::pair<std::string, int64_t>> tiles;
    for (const Spec& s : m.plan_specs(tokens))
      if (s.has_constexpr("GROUPED") && s.constexpr_("GROUPED") > 0 && s.has_constexpr("FMT") &&
          s.constexpr_("FMT") == 10)
        tiles.insert({s.kernel, s.constexpr_("BLOCK_T")});
    return tiles;
  };
  using Tiles = std::set<std::pair<std::string, int64_t>>;
  Runtime sim(RuntimeOptions{1, "", false, "cuda-sim"});
  CHECK(grouped_q2k_tiles(sim, 64) == Tiles{{"qgemm_tiles", 16}});
  CHECK(grouped_q2k_tiles(sim, 24) == Tiles{{"qgemv", 2}});
  CHECK(grouped_q2k_tiles(test::runtime(), 64) == Tiles{{"qgemv_rows16", 4}});
}
