// MoE routing kernels against scalar references: the router softmax's top-k
// (ties to the lower expert, as a stable sort) and its weights, normalised
// over the chosen experts or all of them (within 1e-6 relative: f32 exp and
// sums against double); the sort by expert into padded tiles (exact); the
// weighted combine (exact: one f32 fused multiply-add per slot in slot
// order, as the reference rounds it). JIT and interpreter alike.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <span>

#include "kernels/moe/expert_tiles.h"
#include "moe_reference.h"
#include "support/quantized_x.h"
#include "support/runtime_fixture.h"

using namespace kiln;

namespace {

struct Routing {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

// The kernel through the JIT, or through the interpreter.
void run(const Spec& spec, const LaunchArgs& args, bool interpret) {
  if (interpret)
    test::runtime().interpret(spec, args);
  else
    test::runtime().launch(spec, args);
}

// moe_topk's ids and weights for T tokens of NE logits, `extra` the
// arguments besides its common ones (a gating's or a map's).
Routing run_topk(const Spec& spec, std::vector<float>& logits, int64_t T, int64_t NE, int64_t K,
                 bool norm, const LaunchArgs& extra, bool interpret) {
  Routing r{std::vector<int32_t>(T * K, 99), std::vector<float>(T * K)};
  LaunchArgs args = {{"logits", std::span(logits.data(), T * NE)},
                     {"ids", r.ids},
                     {"weights", r.weights},
                     {"n_expert", NE},
                     {"k", K},
                     {"norm", int64_t{norm}},
                     {"tokens", T}};
  args.insert(args.end(), extra.begin(), extra.end());
  run(spec, args, interpret);
  return r;
}

Routing reference_topk(const std::vector<float>& logits, int64_t T, int64_t NE, int64_t K,
                       bool norm) {
  Routing r;
  for (int64_t t = 0; t < T; ++t) {
    const float* x = &logits[t * NE];
    double mx = *std::max_element(x, x + NE), total = 0;
    std::vector<double> p(NE);
    for (int64_t e = 0; e < NE; ++e) total += p[e] = std::exp(x[e] - mx);
    std::vector<int64_t> order(NE);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x[a] > x[b]; });
    double chosen = 0;
    for (int64_t j = 0; j < K; ++j) chosen += p[order[j]];
    for (int64_t j = 0; j < K; ++j) {
      r.ids.push_back(static_cast<int32_t>(order[j]));
      r.weights.push_back(static_cast<float>(p[order[j]] / (norm ? chosen : total)));
    }
  }
  return r;
}

}  // namespace

TEST_CASE("moe_topk picks and weighs experts as a stable sort does", "[kernels][moe]") {
  const int64_t T = 5, NE = 12, K = 3;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd;
  std::vector<float> logits(T * NE);
  for (float& v : logits) v = nd(rng);
  logits[2 * NE + 4] = logits[2 * NE + 9] = 5.0f;  // a tie for the top: 4 before 9
  logits[3 * NE + 1] = logits[3 * NE + 7] = logits[3 * NE + 11] = -9.0f;
  for (bool norm : {false, true}) {
    INFO("norm " << norm);
    Routing want = reference_topk(logits, T, NE, K, norm);
    Spec spec = find_kernel("moe_topk").make_spec({}, {{"BLOCK", 16}});
    for (bool interpret : {false, true}) {
      Routing got = run_topk(spec, logits, T, NE, K, norm, {}, interpret);
      CHECK(got.ids == want.ids);
      for (size_t i = 0; i < got.weights.size(); ++i)
        CHECK(got.weights[i] == Approx(want.weights[i]).epsilon(1e-6));
    }
  }
}

TEST_CASE("moe_topk with an expert map drops pruned choices, renormalising or not",
          "[kernels][moe]") {
  // 8 router experts, 5 kept (old 1, 3, 6 pruned): weights as without the
  // map, a dropped slot's set to 0 and its id to -1; with renorm the rest
  // divided by their sum.
  const int64_t T = 7, NE = 8, K = 3;
  std::vector<float> logits = test::normal_floats(T * NE, 31);
  std::vector<int32_t> map = {0, -1, 1, -1, 2, 3, -1, 4};
  for (bool norm : {false, true})
    for (bool renorm : {false, true}) {
      INFO("norm " << norm << " renorm " << renorm);
      Routing base = reference_topk(logits, T, NE, K, norm);
      Spec spec = find_kernel("moe_topk").make_spec({}, {{"BLOCK", 8}, {"REMAP", 1}});
      for (bool interpret : {false, true}) {
        Routing got = run_topk(
            spec, logits, T, NE, K, norm,
            {{"expert_map", std::span(map.data(), NE)}, {"renorm", int64_t{renorm}}}, interpret);
        const std::vector<int32_t>& ids = got.ids;
        const std::vector<float>& w = got.weights;
        for (int64_t t = 0; t < T; ++t) {
          double kept = 0;
          for (int64_t j = 0; j < K; ++j)
            if (map[base.ids[t * K + j]] >= 0) kept += base.weights[t * K + j];
          for (int64_t j = 0; j < K; ++j) {
            const int64_t i = t * K + j;
            const int32_t to = map[base.ids[i]];
            CHECK(ids[i] == to);
            const double want = to < 0 ? 0 : renorm ? base.weights[i] / kept : base.weights[i];
            CHECK(w[i] == Approx(want).epsilon(1e-6));
          }
        }
      }
    }
}

// DeepSeek-V3's routing: sigmoid scores, chosen by score + bias among the
// topk_group groups with the best two-expert sums; ties to the lower id.
Routing reference_sigmoid(const std::vector<float>& logits, const std::vector<float>& bias,
                          int64_t T, int64_t NE, int64_t K, int64_t groups, int64_t kept, bool norm,
                          double scale) {
  Routing r;
  const int64_t G = NE / groups;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> p(NE), b(NE);
    for (int64_t e = 0; e < NE; ++e) {
      p[e] = 1 / (1 + std::exp(-static_cast<double>(logits[t * NE + e])));
      b[e] = static_cast<double>(static_cast<float>(p[e]) + bias[e]);
    }
    std::vector<double> score(groups);
    for (int64_t g = 0; g < groups; ++g) {
      std::vector<double> in(b.begin() + g * G, b.begin() + (g + 1) * G);
      std::stable_sort(in.begin(), in.end(), std::greater<double>());
      score[g] = in[0] + in[1];
    }
    std::vector<int64_t> order(groups);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t x, int64_t y) { return score[x] > score[y]; });
    std::vector<int64_t> cand;
    for (int64_t e = 0; e < NE; ++e)
      if (std::find(order.begin(), order.begin() + kept, e / G) != order.begin() + kept)
        cand.push_back(e);
    std::stable_sort(cand.begin(), cand.end(), [&](int64_t x, int64_t y) { return b[x] > b[y]; });
    double chosen = 0;
    for (int64_t j = 0; j < K; ++j) chosen += p[cand[j]];
    for (int64_t j = 0; j < K; ++j) {
      r.ids.push_back(static_cast<int32_t>(cand[j]));
      r.weights.push_back(static_cast<float>(p[cand[j]] / (norm ? chosen : 1.0) * scale));
    }
  }
  return r;
}

TEST_CASE("moe_topk's sigmoid gating chooses by biased score within the best groups",
          "[kernels][moe]") {
  const int64_t T = 6, NE = 16, K = 4;
  std::vector<float> logits = test::normal_floats(T * NE, 21),
                     bias = test::normal_floats(NE, 22, 0.3f);
  logits[1 * NE + 3] = logits[1 * NE + 12] = 4.0f;  // tied scores; bias decides
  bias[3] = bias[12] = 0.5f;                        // a full tie: 3 before 12
  for (auto [groups, kept] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {4, 2}, {8, 3}})
    for (bool norm : {false, true}) {
      INFO(groups << " groups, " << kept << " kept, norm " << norm);
      Routing want = reference_sigmoid(logits, bias, T, NE, K, groups, kept, norm, 2.5);
      Spec spec = find_kernel("moe_topk").make_spec({}, {{"BLOCK", 16}, {"GATING", 1}});
      for (bool interpret : {false, true}) {
        Routing got = run_topk(spec, logits, T, NE, K, norm,
                               {{"bias", std::span(bias.data(), NE)},
                                {"n_group", groups},
                                {"topk_group", kept},
                                {"scale", 2.5}},
                               interpret);
        CHECK(got.ids == want.ids);
        for (size_t i = 0; i < got.weights.size(); ++i)
          CHECK(got.weights[i] == Approx(want.weights[i]).epsilon(1e-6));
      }
    }
  Spec spec = find_kernel("moe_topk").make_spec({}, {{"BLOCK", 16}, {"GATING", 1}});
  ScalarArgs a;
  for (auto [n, v] : std::map<std::string, int64_t>{
           {"tokens", 1}, {"n_expert", 16}, {"k", 4}, {"n_group", 5}, {"topk_group", 1}})
    a.set_int(n, v);
  REQUIRE_THROWS_WITH(find_kernel("moe_topk").launch_shape(spec, a),
                      Catch::Contains("16 experts in 5 groups"));
}

TEST_CASE("moe_sort groups pairs by expert into padded tiles, stable and dropping pruned slots",
          "[kernels][moe]") {
  const int64_t K = 3, NE = 6;
  std::mt19937_64 rng(11);
  // Experts 0-3 and -1 (a pruned expert's slot): 4 and 5 get no tokens;
  // every pair to expert 2; one token.
  std::vector<int32_t> mixed(9 * K), one_expert(9 * K, 2), one_token = {5, 0, 3};
  for (int32_t& e : mixed) e = static_cast<int32_t>(rng() % 5) - 1;
  for (std::vector<int32_t> ids : {mixed, one_expert, one_token})
    for (int64_t tile : {1, 2, 4}) {
      const int64_t T = static_cast<int64_t>(ids.size()) / K;
      const int64_t rows = moe_rows_bound(T, K, NE, tile) + tile;  // room to spare
      test::SortedPairs want = test::sort_pairs(ids, K, NE, tile, rows);
      Spec spec = find_kernel("moe_sort").make_spec({}, {{"TILE", tile}});
      for (bool interpret : {false, true}) {
        INFO(T << " tokens, TILE " << tile << (interpret ? " interpreter" : " JIT"));
        test::SortedPairs got{std::vector<int32_t>(NE, 99), std::vector<int32_t>(NE, 99),
                              std::vector<int32_t>(rows, 99), std::vector<int32_t>(T * K, 99),
                              std::vector<int32_t>(rows / tile, 99)};
        run(spec,
            {{"ids", ids},
             {"counts", got.counts},
             {"offsets", got.offsets},
             {"sorted", got.sorted},
             {"pos", got.pos},
             {"tile_expert", got.tile_expert},
             {"tokens", T},
             {"k", K},
             {"n_expert", NE},
             {"rows", rows}},
            interpret);
        CHECK(got.counts == want.counts);
        CHECK(got.offsets == want.offsets);
        CHECK(got.sorted == want.sorted);
        CHECK(got.pos == want.pos);
        CHECK(got.tile_expert == want.tile_expert);
      }
    }
  const int64_t T = 9;
  std::vector<int32_t>& ids = mixed;
  Spec spec = find_kernel("moe_sort").make_spec({}, {{"TILE", 4}});
  std::vector<int32_t> buf(1024);
  const LaunchArgs small = {{"ids", std::span(ids.data(), T * K)},
                            {"counts", std::span(buf.data(), NE)},
                            {"offsets", std::span(buf.data(), NE)},
                            {"sorted", std::span(buf.data(), 1024)},
                            {"pos", std::span(buf.data(), T * K)},
                            {"tile_expert", std::span(buf.data(), 256)},
                            {"tokens", T},
                            {"k", K},
                            {"n_expert", NE},
                            {"rows", T * K}};
  REQUIRE_THROWS_WITH(test::runtime().launch(spec, small),
                      Catch::Contains("moe_sort") && Catch::Contains("cannot hold"));
}

TEST_CASE("moe_combine sums each token's expert rows in slot order, bit for bit",
          "[kernels][moe]") {
  const int64_t T = 7, K = 3, NE = 4, n = 300, tile = 2;
  std::mt19937_64 rng(5);
  std::vector<int32_t> ids(T * K);
  for (int32_t& e : ids) e = static_cast<int32_t>(rng() % (NE + 1)) - 1;
  const int64_t rows = moe_rows_bound(T, K, NE, tile);
  test::SortedPairs sp = test::sort_pairs(ids, K, NE, tile, rows);
  std::vector<float> y = test::normal_floats(rows * n, 1), w = test::normal_floats(T * K, 2);
  std::vector<float> base = test::normal_floats(T * n, 3);
  for (int64_t add : {0, 1}) {
    std::vector<float> want = test::combine(y, sp.pos, w, K, n, base, add);
    Spec spec = find_kernel("moe_combine").make_spec({}, {{"BLOCK", 128}, {"ADD", add}});
    for (bool interpret : {false, true}) {
      INFO("ADD " << add << (interpret ? " interpreter" : " JIT"));
      std::vector<float> out = base;
      run(spec,
          {{"y", y},
           {"pos", sp.pos},
           {"weights", w},
           {"out", out},
           {"n", n},
           {"k", K},
           {"tokens", T},
           {"rows", rows}},
          interpret);
      CHECK(out == want);
    }
  }
}
