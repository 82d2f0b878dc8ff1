// Expert pruning (models/expert_pruning.h) on a generated qwen3moe/tiny
// (F16, 8 experts, 2 used):
// - the hit map counts every (token, slot) pair once: k per token per layer;
// - keeping every expert gives a file whose logits equal the original's bit
//   for bit, with the reduced router and with the kept one (the remapping
//   path, identity map);
// - keeping 5 of 8 with the full router (no renormalisation) equals the
//   original model with the pruned experts' down projections zeroed, which
//   is what dropping a chosen expert with weight 0 means (within 1e-5 of the
//   logits' spread: the grouped tiles differ, the per-row arithmetic not);
// - the pruned tensors are the kept experts' bytes, the router rows alike;
// - hit maps read back from JSON, top-K breaks ties to the lower id;
// - bad input: malformed hit files, a translation table that is too short,
//   keeps an expert twice or points past the experts, an expert tensor
//   whose count disagrees with expert_count, more experts used per token
//   than held, a router or expert tensor of another width.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include "ir/error.h"
#include "models/expert_pruning.h"
#include "models/gguf_writer.h"
#include "models/llm.h"
#include "models/model_generator.h"
#include "support/runtime_fixture.h"
#include "support/temp_dir.h"
#include "support/test_data.h"

using namespace kiln;

namespace {

const test::TempDir& dir() {
  static const test::TempDir d("kiln-test-pruning");
  return d;
}

std::string tiny_moe() {
  std::string path = dir().path("qwen3moe.gguf");
  if (!std::filesystem::exists(path)) {
    GenModelOptions o;
    o.format = WeightFormat::f16;
    o.seed = 4;
    generate_model(find_model_preset("qwen3moe", "tiny"), o, path);
  }
  return path;
}

const std::vector<int32_t> kPrompt = {1, 17, 230, 5, 99, 64, 3, 200, 41, 7, 150, 12};

std::vector<float> logits(const std::string& path) {
  Llm m(path, test::runtime(), 32);
  return m.forward(kPrompt, true);
}

// A tensor's shape and bytes as rewrite copies them, for an edit to change.
using TensorEdit =
    std::function<void(const std::string& name, std::vector<int64_t>& shape, std::string& bytes)>;

// A copy of `path` with metadata `key` set to `value` (added if missing,
// removed if nullopt), every tensor passed through `edit` if given.
std::string rewrite(const std::string& path, const std::string& out, const std::string& key,
                    std::optional<GgufWriter::Value> value, const TensorEdit& edit = {}) {
  GgufFile f = GgufFile::open(path);
  GgufWriter w(f.alignment());
  bool added = false;
  for (const auto& [k, v] : f.metadata()) {
    if (k == key) {
      if (value) w.add(k, *value);
      added = true;
      continue;
    }
    w.add(k, GgufWriter::copy_of(v));
  }
  if (!added && value) w.add(key, *value);
  for (const GgufTensor& t : f.tensors()) {
    std::string bytes(reinterpret_cast<const char*>(t.data), t.nbytes);
    std::vector<int64_t> shape = t.shape;
    if (edit) edit(t.name, shape, bytes);
    w.add_tensor(t.name, t.type, shape, bytes);
  }
  std::string p = dir().path(out);
  w.write(p);
  return p;
}

// An edit zeroing experts' down projections, per layer.
TensorEdit zero_down(const std::vector<std::vector<int32_t>>& experts) {
  return [experts](const std::string& name, std::vector<int64_t>& shape, std::string& bytes) {
    for (size_t l = 0; l < experts.size(); ++l)
      if (name == "blk." + std::to_string(l) + ".ffn_down_exps.weight")
        for (int32_t e : experts[l]) {
          const size_t slice = bytes.size() / static_cast<size_t>(shape.back());
          std::memset(bytes.data() + slice * static_cast<size_t>(e), 0, slice);
        }
  };
}

}  // namespace

TEST_CASE("the expert hit map counts k pairs per token and layer", "[models][moe]") {
  Llm m(tiny_moe(), test::runtime(), 32);
  m.count_expert_hits();
  m.forward(kPrompt);
  m.reset();
  m.forward({5, 6, 7});
  std::vector<int32_t> hits = m.expert_hits();
  const ModelConfig& c = m.config();
  REQUIRE(static_cast<int64_t>(hits.size()) == c.n_layer * c.n_expert);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    int64_t total = 0;
    for (int64_t e = 0; e < c.n_expert; ++e) total += hits[l * c.n_expert + e];
    CHECK(total == static_cast<int64_t>(kPrompt.size() + 3) * c.n_expert_used);
  }
  Llm late(tiny_moe(), test::runtime(), 32);
  late.forward({1});
  REQUIRE_THROWS_WITH(late.count_expert_hits(), Catch::Contains("before the first forward"));
}

TEST_CASE("pruning keeps the chosen experts' bytes and, keeping all, the logits", "[models][moe]") {
  const std::string src = tiny_moe();
  GgufFile in = GgufFile::open(src);
  const std::vector<float> want = logits(src);
  std::vector<std::vector<int32_t>> all(2, {0, 1, 2, 3, 4, 5, 6, 7});
  for (bool keep_router : {false, true}) {
    INFO("keep_router " << keep_router);
    std::string out = dir().path(keep_router ? "all-router.gguf" : "all.gguf");
    prune_experts(in, all, out, {keep_router, false});
    CHECK(logits(out) == want);
  }
  // 5 of 8: the kept slices, in order; the router's rows alike.
  std::vector<std::vector<int32_t>> keep = {{0, 2, 4, 5, 7}, {1, 2, 3, 6, 7}};
  std::string five = dir().path("five.gguf");
  prune_experts(in, keep, five);
  GgufFile out = GgufFile::open(five);
  CHECK(out.get_u64("qwen3moe.expert_count") == 5);
  CHECK(out.get_u64(kExpertCountKey) == 8);
  CHECK(out.get_i32_array(kExpertMapKey) ==
        std::vector<int32_t>{0, -1, 1, -1, 2, 3, -1, 4, -1, 0, 1, 2, -1, -1, 3, 4});
  for (const char* name : {"blk.1.ffn_up_exps.weight", "blk.1.ffn_gate_inp.weight"}) {
    const GgufTensor &a = in.tensor(name), &b = out.tensor(name);
    REQUIRE(b.shape.back() == 5);
    const uint64_t slice = a.nbytes / 8;
    for (size_t j = 0; j < 5; ++j)
      CHECK(std::memcmp(b.data + j * slice, a.data + keep[1][j] * slice, slice) == 0);
  }
  Llm pruned(five, test::runtime(), 32);
  CHECK(pruned.config().n_expert == 5);
  CHECK(pruned.config().n_router == 5);
  CHECK(std::isfinite(pruned.forward(kPrompt).at(0)));
}

TEST_CASE("a kept router drops pruned choices with weight 0", "[models][moe]") {
  const std::string src = tiny_moe();
  std::vector<std::vector<int32_t>> keep = {{0, 2, 4, 5, 7}, {1, 2, 3, 6, 7}},
                                    pruned = {{1, 3, 6}, {0, 4, 5}};
  std::string out = dir().path("five-router.gguf");
  prune_experts(GgufFile::open(src), keep, out, {true, false});
  Llm m(out, test::runtime(), 32);
  CHECK(m.config().n_router == 8);
  std::vector<float> got = m.forward(kPrompt, true);
  std::vector<float> want = logits(
      rewrite(src, "zeroed.gguf", "general.name", GgufWriter::str("zeroed"), zero_down(pruned)));
  REQUIRE(got.size() == want.size());
  double s = 0, worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    s = std::max(s, std::fabs(static_cast<double>(want[i])));
    worst = kiln::test::worse(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  CHECK(worst <= 1e-5 * s);
  // Renormalised, the survivors take the dropped share: other logits.
  std::string renorm = dir().path("five-renorm.gguf");
  prune_experts(GgufFile::open(src), keep, renorm, {true, true});
  Llm r(renorm, test::runtime(), 32);
  CHECK(r.config().expert_renorm);
  CHECK(r.forward(kPrompt, true) != got);
}

TEST_CASE("hit maps read back from JSON; top-K ties go to the lower id", "[models][moe]") {
  ExpertHits h;
  h.model = "m.gguf";
  h.n_layer = 2;
  h.n_expert = 4;
  h.tokens = 9;
  h.counts = {5, 1, 5, 0, 0, 0, 3, 3};
  ExpertHits back = ExpertHits::from_json(h.to_json(), "hits.json");
  CHECK(back.counts == h.counts);
  CHECK(back.tokens == 9);
  CHECK(top_experts(h, 2) == std::vector<std::vector<int32_t>>{{0, 2}, {2, 3}});
  CHECK(top_experts(h, 3) == std::vector<std::vector<int32_t>>{{0, 1, 2}, {0, 2, 3}});
  CHECK(h.to_csv().rfind("layer,expert,hits\n0,0,5\n", 0) == 0);
  REQUIRE_THROWS_WITH(top_experts(h, 5), Catch::Contains("keep 5 experts of 4"));
  const std::string good = h.to_json();
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {good.substr(0, good.size() / 2), "not a JSON object"},
           {"[1, 2]", "not a JSON object"},
           {R"({"n_layer": 1, "n_expert": 2, "tokens": 1, "hits": [[1]]})", "hits row 0"},
           {R"({"n_layer": 2, "n_expert": 2, "tokens": 1, "hits": [[1, 2]]})", "'hits'"},
           {R"({"n_layer": 1, "n_expert": 2, "tokens": 1, "hits": [[1, -2]]})", "hits row 0"},
           {R"({"n_layer": -1, "n_expert": 2, "tokens": 1, "hits": []})", "'n_layer'"}}) {
    INFO(text);
    REQUIRE_THROWS_WITH(ExpertHits::from_json(text, "hits.json"),
                        Catch::Contains("hits.json") && Catch::Contains(why));
  }
}

TEST_CASE("hit files cut or corrupted anywhere read back or are refused, never crash",
          "[models][moe][error]") {
  ExpertHits h;
  h.n_layer = 3;
  h.n_expert = 5;
  h.tokens = 40;
  for (int64_t i = 0; i < 15; ++i) h.counts.push_back(i * 7 % 11);
  const std::string good = h.to_json();
  std::mt19937_64 rng(9);
  const std::string junk = "{}[],:\"-0123456789eE.tfn ";
  for (int i = 0; i < 3000; ++i) {
    std::string text = good;
    if (i % 3 == 0) text.resize(rng() % text.size());
    for (int j = 0; j < 1 + i % 4 && !text.empty(); ++j)
      text[rng() % text.size()] = junk[rng() % junk.size()];
    try {
      ExpertHits back = ExpertHits::from_json(text, "hits.json");
      CHECK(static_cast<int64_t>(back.counts.size()) == back.n_layer * back.n_expert);
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("hits.json"));
    }
  }
}

TEST_CASE("pruned files with a bad translation table are refused", "[models][moe][error]") {
  const std::string src = tiny_moe();
  std::string five = dir().path("five-bad.gguf");
  prune_experts(GgufFile::open(src), {{0, 2, 4, 5, 7}, {1, 2, 3, 6, 7}}, five);
  auto with_map = [&](std::vector<int32_t> map) {
    return rewrite(five, "bad.gguf", kExpertMapKey, GgufWriter::array(map));
  };
  const std::vector<int32_t> ok = {0, -1, 1, -1, 2, 3, -1, 4, -1, 0, 1, 2, -1, -1, 3, 4};
  auto refused = [&](std::vector<int32_t> map, const std::string& why) {
    INFO(why);
    REQUIRE_THROWS_WITH(Llm(with_map(map), test::runtime(), 8),
                        Catch::Contains("kiln.expert_map") && Catch::Contains(why));
  };
  refused(std::vector<int32_t>(ok.begin(), ok.end() - 1), "needs n_layer x");
  std::vector<int32_t> twice = ok;
  twice[1] = 0;  // layer 0: old 0 and 1 both to 0
  refused(twice, "layer 0");
  std::vector<int32_t> past = ok;
  past[9] = 5;  // layer 1: to 5 of 5 experts
  refused(past, "out of range");
  std::vector<int32_t> fewer = ok;
  fewer[0] = -1;
  refused(fewer, "keeps 4 experts");
  // An expert count the tensors do not hold.
  REQUIRE_THROWS_WITH(
      Llm(rewrite(src, "count.gguf", "qwen3moe.expert_count", GgufWriter::u32(6)), test::runtime(),
          8),
      Catch::Contains("blk.0.ffn_gate_inp.weight") && Catch::Contains("expert_count"));
}

TEST_CASE(
    "MoE files with more experts used than held, or a router or expert of another width, "
    "are refused",
    "[models][moe][error]") {
  const std::string src = tiny_moe();  // n_embd 256, 8 experts of 128, 2 used
  for (uint32_t used : {0u, 9u}) {
    INFO(used);
    REQUIRE_THROWS_WITH(
        Llm(rewrite(src, "used.gguf", "qwen3moe.expert_used_count", GgufWriter::u32(used)),
            test::runtime(), 8),
        Catch::Contains("qwen3moe.expert_used_count") &&
            Catch::Contains("is " + std::to_string(used)));
  }
  // Layer 1's tensor with its first axis (or an expert's rows) halved,
  // bytes cut to fit: a file that is well formed but not this model.
  auto halved = [&](const std::string& tensor, size_t axis) {
    return rewrite(src, "halved.gguf", "general.name", GgufWriter::str("halved"),
                   [&](const std::string& name, std::vector<int64_t>& shape, std::string& bytes) {
                     if (name != tensor) return;
                     shape[axis] /= 2;
                     bytes.resize(bytes.size() / 2);
                   });
  };
  REQUIRE_THROWS_WITH(Llm(halved("blk.1.ffn_gate_inp.weight", 0), test::runtime(), 8),
                      Catch::Contains("tensor 'blk.1.ffn_gate_inp.weight' has shape [128,8], "
                                      "not [256,8]"));
  REQUIRE_THROWS_WITH(Llm(halved("blk.1.ffn_down_exps.weight", 1), test::runtime(), 8),
                      Catch::Contains("tensor 'blk.1.ffn_down_exps.weight' has shape [128,128,8], "
                                      "not [128,256,8]"));
  REQUIRE_THROWS_WITH(Llm(halved("blk.1.ffn_up_exps.weight", 0), test::runtime(), 8),
                      Catch::Contains("'blk.1.ffn_up_exps.weight' has shape [128,128,8]"));
}
