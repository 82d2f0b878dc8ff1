#include "models/logprobs.h"

#include <algorithm>
#include <cmath>

namespace kiln {

TokenLogprob token_logprob(const float* logits, int64_t n_vocab, int32_t token, int64_t top_n) {
  double mx = -INFINITY;
  for (int64_t i = 0; i < n_vocab; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double norm = mx + std::log(sum);
  TokenLogprob out;
  out.token = token;
  out.logprob = static_cast<float>(static_cast<double>(logits[token]) - norm);
  const size_t n = static_cast<size_t>(std::clamp<int64_t>(top_n, 0, n_vocab));
  if (n == 0) return out;
  // A min-heap of the best n so far: one pass, no copy of the row.
  using Entry = std::pair<float, int32_t>;
  auto better = [](const Entry& a, const Entry& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  std::vector<Entry> heap;
  heap.reserve(n + 1);
  for (int64_t i = 0; i < n_vocab; ++i) {
    const Entry e{logits[i], static_cast<int32_t>(i)};
    if (heap.size() < n) {
      heap.push_back(e);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(e, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = e;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  for (const Entry& e : heap)
    out.top.push_back({e.second, static_cast<float>(static_cast<double>(e.first) - norm)});
  return out;
}

}  // namespace kiln
