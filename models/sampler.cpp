#include "models/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

namespace kiln {

int32_t Sampler::sample(const float* logits, int64_t n_vocab, const std::vector<int32_t>& history) {
  std::vector<float> l(logits, logits + n_vocab);
  if (o_.repeat_penalty != 1.0) {
    // llama.cpp's rule: positive logits shrink, negative ones grow.
    std::unordered_set<int32_t> seen;
    int64_t from = std::max<int64_t>(0, static_cast<int64_t>(history.size()) - o_.repeat_last_n);
    for (int64_t i = from; i < static_cast<int64_t>(history.size()); ++i) seen.insert(history[i]);
    for (int32_t t : seen)
      if (t >= 0 && t < n_vocab)
        l[t] = l[t] > 0 ? static_cast<float>(l[t] / o_.repeat_penalty)
                        : static_cast<float>(l[t] * o_.repeat_penalty);
  }
  if (o_.temperature <= 0)
    return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  std::vector<int32_t> ids(n_vocab);
  std::iota(ids.begin(), ids.end(), 0);
  int64_t k = o_.top_k > 0 ? std::min(o_.top_k, n_vocab) : n_vocab;
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  ids.resize(k);
  std::vector<double> p(k);
  double mx = l[ids[0]], total = 0;
  for (int64_t i = 0; i < k; ++i) total += p[i] = std::exp((l[ids[i]] - mx) / o_.temperature);
  // Top-p: the smallest prefix whose probability reaches top_p.
  int64_t keep = k;
  if (o_.top_p < 1.0) {
    double acc = 0;
    for (int64_t i = 0; i < k; ++i) {
      acc += p[i] / total;
      if (acc >= o_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  std::discrete_distribution<int64_t> pick(p.begin(), p.begin() + keep);
  return ids[pick(rng_)];
}

}  // namespace kiln
