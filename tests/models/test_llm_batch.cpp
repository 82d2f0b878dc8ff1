// Serving steps (Llm::forward_batch over a pool of pages) against the
// single-sequence forward: two or three sequences packed into each step,
// prompts in chunks beside decodes, pages taken from a KvPagePool in the
// order sequences grow (so interleaved in the pool), and each sequence's
// logits compared with its own unbatched run at the same positions. The
// architectures cover plain llama, MoE routing (qwen3moe), sliding windows
// (gemma3) and sinks with windows (gpt-oss); f16 and q8_0 caches.
//
// Tolerance: the same f32 operations per row except the matmuls' token
// blocking and the attention kernels (varlen and batched decode against
// prefill and decode), which reassociate sums: max |d| <= 1e-3 of the
// logits' spread (as the backends' test; measured up to 2e-4), and the same
// top-1 token.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "ir/error.h"
#include "models/llm.h"
#include "models/model_generator.h"
#include "runtime/kv_page_pool.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"
#include "support/tiny_model.h"

using namespace kiln;

namespace {

std::string tiny_model(const std::string& family) {
  return test::tiny_model(family, WeightFormat::f16, 9);
}

double rel_diff(const float* a, const float* b, int64_t n) {
  double m = 0, s = 0, worst = 0;
  for (int64_t i = 0; i < n; ++i) m += b[i];
  m /= static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) s += (b[i] - m) * (b[i] - m);
  s = std::sqrt(s / static_cast<double>(n));
  for (int64_t i = 0; i < n; ++i)
    worst = kiln::test::worse(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  return worst / s;
}

// Each sequence's steps: the token runs it brings, step by step (empty:
// not in that step).
using Script = std::vector<std::vector<std::vector<int32_t>>>;

void check_batched(const std::string& family, KvCacheType kv, const Script& script) {
  INFO(family << " kv " << kv_cache_type_name(kv));
  const std::string path = tiny_model(family);
  const int64_t page = 32, n_ctx = 128, n_pages = 12;
  Llm served(path, test::runtime(), n_ctx, kv, page, n_pages);
  const int64_t V = served.config().n_vocab;
  KvPagePool pool(n_pages, page);
  std::vector<std::unique_ptr<Llm>> alone;
  std::vector<KvPagePool::SeqId> ids;
  for (size_t i = 0; i < script.size(); ++i) {
    alone.push_back(std::make_unique<Llm>(path, test::runtime(), n_ctx, kv));
    ids.push_back(pool.create());
  }
  for (size_t step = 0; step < script[0].size(); ++step) {
    INFO("step " << step);
    std::vector<Llm::SeqChunk> chunks;
    std::vector<size_t> who;
    for (size_t i = 0; i < script.size(); ++i) {
      const std::vector<int32_t>& tokens = script[i][step];
      if (tokens.empty()) continue;
      const int64_t pos0 = pool.length(ids[i]);
      pool.append(ids[i], static_cast<int64_t>(tokens.size()));
      chunks.push_back({tokens, pos0, pool.table(ids[i])});
      who.push_back(i);
    }
    const std::vector<float> got = served.forward_batch(chunks);
    REQUIRE(got.size() == who.size() * static_cast<size_t>(V));
    for (size_t r = 0; r < who.size(); ++r) {
      INFO("sequence " << who[r]);
      const std::vector<float>& want = alone[who[r]]->forward(script[who[r]][step]);
      const float* g = got.data() + r * V;
      CHECK(rel_diff(g, want.data() + want.size() - V, V) <= 1e-3);
      CHECK(std::max_element(g, g + V) - g ==
            std::max_element(want.end() - V, want.end()) - (want.end() - V));
    }
  }
  for (auto id : ids) pool.free(id);
  CHECK(pool.free_pages() == n_pages);
}

std::vector<int32_t> run_of(int32_t first, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(first + 7 * i);
  return t;
}

}  // namespace

TEST_CASE("serving steps give each sequence its own forward's logits", "[models][llm][batch]") {
  // Sequence 0: a prompt of 40 in two chunks (across a page), then decodes.
  // Sequence 1: joins at step 1 with a prompt of 9, decodes, leaves.
  // Sequence 2: a one-token prompt at step 2, then decodes.
  const Script script = {
      {run_of(1, 24), run_of(30, 16), {5}, {6}, {7}},
      {{}, run_of(3, 9), {8}, {9}, {}},
      {{}, {}, {11}, {12}, {13}},
  };
  for (const char* family : {"llama", "qwen3moe", "gemma3", "gpt-oss"})
    check_batched(family, DType::f16, script);
  check_batched("llama", DType::i8, script);
}

TEST_CASE("a sequence on a prefix's cached pages gets the logits of computing the prefix",
          "[models][llm][batch]") {
  // Sequence a computes a 64-token prefix (two full pages); b starts on
  // those pages (KvPagePool::create(shared), as a prefix-cache hit) and
  // reads only its own 9 tokens. The same kernels run on the same shapes
  // as an unbatched forward of the prefix and then the 9: bit for bit.
  for (const char* family : {"llama", "gpt-oss"}) {
    INFO(family);
    const std::string path = tiny_model(family);
    const int64_t page = 32;
    Llm served(path, test::runtime(), 128, DType::f16, page, 8);
    KvPagePool pool(8, page);
    std::vector<int32_t> prefix, tail = run_of(5, 9);
    for (int32_t i = 0; i < 64; ++i) prefix.push_back(1 + (i * 37) % 250);
    auto a = pool.create();
    pool.append(a, 64);
    served.forward_batch({{prefix, 0, pool.table(a)}});
    auto b = pool.create(pool.table(a));
    pool.append(b, 9);
    const std::vector<float> got = served.forward_batch({{tail, 64, pool.table(b)}});
    Llm alone(path, test::runtime(), 128, DType::f16, page);
    alone.forward(prefix);
    const std::vector<float>& want = alone.forward(tail);
    CHECK(got == want);
    CHECK(pool.refs(pool.table(a)[0]) == 2);
  }
}

TEST_CASE("serving steps refuse bad sequences, and a serving model refuses forward",
          "[models][llm][batch][error]") {
  const std::string path = tiny_model("llama");
  Llm served(path, test::runtime(), 64, DType::f16, 32, 4);
  CHECK(served.kv_pages() == 4);
  REQUIRE_THROWS_WITH(served.forward({1, 2}), Catch::Contains("serving pool of 4 pages") &&
                                                  Catch::Contains("forward_batch"));
  REQUIRE_THROWS_WITH(served.forward_batch({}), Catch::Contains("no sequences"));
  REQUIRE_THROWS_WITH(served.forward_batch({{{1, 2}, 0, {7}}}),
                      Catch::Contains("sequence 0") && Catch::Contains("page 7") &&
                          Catch::Contains("outside the pool of 4 pages"));
  REQUIRE_THROWS_WITH(served.forward_batch({{{1}, 0, {0}}, {{1, 2}, 31, {1}}}),
                      Catch::Contains("sequence 1") && Catch::Contains("1 entries, 2 in use"));
  REQUIRE_THROWS_WITH(served.forward_batch({{{1}, 63, {0, 1}}, {{1, 2}, 63, {2, 3}}}),
                      Catch::Contains("sequence 1: positions 63 .. 64 are outside the context "
                                      "of 64"));
  REQUIRE_THROWS_WITH(served.forward_batch({{{1, 1 << 20}, 0, {0}}}),
                      Catch::Contains("token id 1048576 is outside the vocabulary"));
  REQUIRE_THROWS_WITH(Llm(path, test::runtime(), 64, DType::f16, 0, 4),
                      Catch::Contains("needs a page size"));
  Llm single(path, test::runtime(), 64);
  REQUIRE_THROWS_WITH(single.forward_batch({{{1}, 0, {0}}}), Catch::Contains("not a serving pool"));
}
