// The sampler (models/sampler.h) against a double-precision reference of
// its chain: the repetition penalty, top-k, top-p's nucleus (the shortest
// best-first prefix reaching top_p of the probability after top-k) and the
// temperature. Draws must stay inside the reference's candidates, and the
// best candidate's frequency over 20000 draws must be within 5 standard
// deviations of its probability (a wrong nucleus or temperature moves it by
// far more); greedy picks the lowest id of tied maxima; a seed repeats.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "models/sampler.h"

using namespace kiln;

namespace {

// The reference: candidates best first and their probabilities.
std::vector<std::pair<int32_t, double>> nucleus(const std::vector<float>& l,
                                                const SamplerOptions& o) {
  const int64_t n = static_cast<int64_t>(l.size());
  std::vector<int32_t> ids(l.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  const int64_t k = o.top_k > 0 ? std::min(o.top_k, n) : n;
  std::vector<double> w;
  for (int64_t i = 0; i < k; ++i) w.push_back(std::exp((l[ids[i]] - l[ids[0]]) / o.temperature));
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<std::pair<int32_t, double>> out;
  double acc = 0;
  for (int64_t i = 0; i < k && (o.top_p >= 1 || acc < o.top_p); ++i) {
    acc += w[i] / total;
    out.push_back({ids[i], w[i]});
  }
  double kept = 0;
  for (auto& c : out) kept += c.second;
  for (auto& c : out) c.second /= kept;
  return out;
}

void check_draws(const std::vector<float>& l, const SamplerOptions& o) {
  INFO("top_k " << o.top_k << " top_p " << o.top_p << " temperature " << o.temperature);
  const auto want = nucleus(l, o);
  std::set<int32_t> allowed;
  for (auto& c : want) allowed.insert(c.first);
  Sampler s(o);
  const int draws = 20000;
  std::map<int32_t, int> seen;
  for (int i = 0; i < draws; ++i) {
    int32_t t = s.sample(l.data(), static_cast<int64_t>(l.size()), {});
    REQUIRE(allowed.count(t));
    ++seen[t];
  }
  const double p = want[0].second, sd = std::sqrt(p * (1 - p) / draws);
  CHECK(std::fabs(seen[want[0].first] / static_cast<double>(draws) - p) <= 5 * sd + 1e-12);
  if (want.size() > 1) CHECK(seen.size() > 1);
}

}  // namespace

TEST_CASE("sampling draws from the reference's candidates with their probabilities",
          "[models][sampler]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 2);
  std::vector<float> peaked(1000), flat(1000);
  for (float& x : peaked) x = normal(rng);
  for (float& x : flat) x = normal(rng) * 0.05f;  // a nucleus of hundreds
  for (const auto* l : {&peaked, &flat}) {
    check_draws(*l, {0.7, 0, 0.9, 1.0, 64, 1});   // top-p alone
    check_draws(*l, {1.0, 5, 1.0, 1.0, 64, 2});   // top-k alone
    check_draws(*l, {1.3, 40, 0.5, 1.0, 64, 3});  // both
    check_draws(*l, {0.9, 0, 1.0, 1.0, 64, 4});   // every token
  }
}

TEST_CASE("greedy takes the lowest of tied maxima; the penalty and the seed", "[models][sampler]") {
  std::vector<float> l = {1, 3, -2, 3, 0.5f};
  CHECK(Sampler(SamplerOptions{0, 40, 0.95, 1.0, 64, 0}).sample(l.data(), 5, {}) == 1);
  // llama.cpp's penalty: a seen positive logit is divided (3 / 2 = 1.5 < the
  // other 3), a seen negative one multiplied.
  CHECK(Sampler(SamplerOptions{0, 40, 0.95, 2.0, 64, 0}).sample(l.data(), 5, {1}) == 3);
  std::vector<float> neg = {-1, -0.9f};
  CHECK(Sampler(SamplerOptions{0, 40, 0.95, 2.0, 64, 0}).sample(neg.data(), 2, {1}) == 0);
  // Only the last repeat_last_n tokens count.
  CHECK(Sampler(SamplerOptions{0, 40, 0.95, 2.0, 1, 0}).sample(l.data(), 5, {1, 4}) == 1);
  // OpenAI's penalties by llama.cpp's rule: after the repetition penalty,
  // frequency_penalty per time seen and presence_penalty once.
  auto pick = [](std::vector<float> logits, double rep, double present, double freq,
                 std::vector<int32_t> history) {
    SamplerOptions o{0, 40, 0.95, rep, 64, 0};
    o.presence_penalty = present;
    o.frequency_penalty = freq;
    return Sampler(o).sample(logits.data(), static_cast<int64_t>(logits.size()), history);
  };
  CHECK(pick(l, 1.0, 0.1, 0, {1}) == 3);        // 2.9 < 3
  CHECK(pick(l, 1.0, 0, 0.4, {1, 3, 1}) == 3);  // 3 - 0.8 < 3 - 0.4
  CHECK(pick(l, 1.0, -0.1, 0, {3}) == 3);       // a negative one raises: 3.1
  // 1 / 2 - (2 * 0.2 + 0.1) is exactly 0, tied with token 0 (the lower id
  // wins); with 0.19 it is 0.02.
  CHECK(pick({0, 1}, 2.0, 0.1, 0.2, {1, 1}) == 0);
  CHECK(pick({0, 1}, 2.0, 0.1, 0.19, {1, 1}) == 1);
  CHECK(pick({-1, -0.9f}, 1.0, 0.2, 0, {1}) == 0);  // -1.1
  std::vector<float> wide(500);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<float>(std::sin(i * 0.37));
  for (SamplerOptions o :
       {SamplerOptions{0.8, 0, 0.9, 1.0, 64, 7}, SamplerOptions{0.8, 0, 1.0, 1.0, 64, 7}}) {
    Sampler a(o), b(o);
    for (int i = 0; i < 50; ++i)
      CHECK(a.sample(wide.data(), 500, {}) == b.sample(wide.data(), 500, {}));
  }
}
