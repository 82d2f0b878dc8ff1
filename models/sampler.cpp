#include "models/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

namespace kiln {

double TokenDist::total() const {
  double t = 0;
  for (double w : weights) t += w;
  return t;
}

double TokenDist::prob(int32_t id) const {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] == id) return weights[i] / total();
  return 0;
}

int32_t Sampler::draw(const TokenDist& d) {
  if (greedy()) return d.ids.front();
  std::discrete_distribution<size_t> pick(d.weights.begin(), d.weights.end());
  return d.ids[pick(rng_)];
}

double Sampler::uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

TokenDist Sampler::distribution(const float* logits, int64_t n_vocab,
                                const std::vector<int32_t>& history,
                                const uint32_t* allowed) const {
  std::vector<float> l(logits, logits + n_vocab);
  // Tokens outside the mask weigh nothing: the chain below picks among
  // the others as it would among all.
  if (allowed)
    for (int64_t t = 0; t < n_vocab; ++t)
      if (!(allowed[t >> 5] >> (t & 31) & 1u)) l[static_cast<size_t>(t)] = -INFINITY;
  if (o_.repeat_penalty != 1.0 || o_.presence_penalty != 0 || o_.frequency_penalty != 0) {
    std::unordered_map<int32_t, int64_t> seen;  // token -> times in the window
    int64_t from = std::max<int64_t>(0, static_cast<int64_t>(history.size()) - o_.repeat_last_n);
    for (int64_t i = from; i < static_cast<int64_t>(history.size()); ++i) ++seen[history[i]];
    // In float, as llama.cpp computes it.
    const auto repeat = static_cast<float>(o_.repeat_penalty);
    const auto freq = static_cast<float>(o_.frequency_penalty);
    const auto present = static_cast<float>(o_.presence_penalty);
    for (auto [t, count] : seen) {
      if (t < 0 || t >= n_vocab) continue;
      float& x = l[static_cast<size_t>(t)];
      x = x <= 0 ? x * repeat : x / repeat;
      x -= static_cast<float>(count) * freq + present;
    }
  }
  if (greedy())
    return {{static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin())}, {1.0}};
  // Candidates best first (ties to the lower id), sorted only as far as
  // needed: a vocabulary-wide sort costs milliseconds a token.
  std::vector<int32_t> ids(n_vocab);
  std::iota(ids.begin(), ids.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  const double mx = *std::max_element(l.begin(), l.end());
  auto weight = [&](int32_t id) { return std::exp((l[id] - mx) / o_.temperature); };
  if (o_.top_k <= 0 && o_.top_p >= 1.0) {  // every token, by its weight
    TokenDist d{std::move(ids), std::vector<double>(n_vocab)};
    for (int64_t i = 0; i < n_vocab; ++i) d.weights[i] = weight(static_cast<int32_t>(i));
    return d;
  }
  const int64_t k = o_.top_k > 0 ? std::min(o_.top_k, n_vocab) : n_vocab;
  double total = 0;
  if (k == n_vocab)
    for (int64_t i = 0; i < n_vocab; ++i) total += weight(static_cast<int32_t>(i));
  // Top-p: the smallest prefix whose probability reaches top_p, looked for
  // in sorted prefixes of growing length (k at once with top-k).
  int64_t sorted = k == n_vocab ? std::min<int64_t>(64, n_vocab) : k, keep = k;
  std::vector<double> p;
  for (;;) {
    std::partial_sort(ids.begin() + static_cast<int64_t>(p.size()), ids.begin() + sorted, ids.end(),
                      better);
    for (int64_t i = static_cast<int64_t>(p.size()); i < sorted; ++i) p.push_back(weight(ids[i]));
    if (k < n_vocab) {
      total = 0;
      for (double w : p) total += w;
    }
    if (o_.top_p < 1.0) {
      double acc = 0;
      int64_t i = 0;
      while (i < sorted && acc < o_.top_p) acc += p[static_cast<size_t>(i++)] / total;
      if (acc >= o_.top_p) {
        keep = i;
        break;
      }
    }
    if (sorted == k) break;
    sorted = std::min(k, sorted * 4);
  }
  ids.resize(static_cast<size_t>(keep));
  p.resize(static_cast<size_t>(keep));
  return {std::move(ids), std::move(p)};
}

}  // namespace kiln
