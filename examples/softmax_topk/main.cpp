// Checks softmax_topk against a float64 reference on the CPU and on the
// CUDA simulator (and a GPU where one is present): random rows, rows full of
// ties, every kind of k; then tunes its block size for a vocabulary-sized
// row. Exit status 0: every check held.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "softmax_topk.h"

using namespace kiln;

namespace {

int failures = 0;

// Reference: the k-th largest logit counting repeats, softmax in double
// over the logits at or above it. The kernel sums exp() in f32 in another
// order: 1e-5 of the value covers it (plus 1e-7 absolute, below which a
// probability is 0 to any sampler).
std::vector<double> reference(const std::vector<float>& x, int64_t rows, int64_t n, int64_t k,
                              double temperature) {
  std::vector<double> y(x.size(), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * n;
    std::vector<float> sorted(row, row + n);
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    const float threshold = k > 0 && k < n ? sorted[static_cast<size_t>(k - 1)] : -INFINITY;
    double total = 0;
    for (int64_t i = 0; i < n; ++i)
      if (row[i] >= threshold) total += std::exp((row[i] - sorted[0]) / temperature);
    for (int64_t i = 0; i < n; ++i)
      if (row[i] >= threshold)
        y[static_cast<size_t>(r * n + i)] = std::exp((row[i] - sorted[0]) / temperature) / total;
  }
  return y;
}

void check(Device& dev, int64_t rows, int64_t n, int64_t k, float temperature, bool ties,
           uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-8, 8);
  std::vector<float> x(static_cast<size_t>(rows * n)), y(x.size());
  // Ties: logits on a grid of quarters, so the k-th largest has copies.
  for (float& v : x) v = ties ? std::round(u(rng) * 4) / 4 : u(rng);
  dev.launch(
      "softmax_topk",
      {{"x", x}, {"y", y}, {"n", n}, {"k", k}, {"temperature", temperature}, {"rows", rows}});
  std::vector<double> want = reference(x, rows, n, k, temperature);
  for (size_t i = 0; i < y.size(); ++i)
    if (!(std::fabs(y[i] - want[i]) <= 1e-5 * want[i] + 1e-7) && ++failures <= 5)
      std::printf("  MISMATCH n=%lld k=%lld ties=%d: y[%zu] = %.8g, want %.8g\n",
                  static_cast<long long>(n), static_cast<long long>(k), ties, i, y[i], want[i]);
}

}  // namespace

int main() {
  try {
    register_kernel(softmax_topk_def());
    for (const char* backend : {"cpu", "cuda-sim"}) {
      Device dev(backend, 2);
      for (int64_t k : {1, 5, 40, 0, 300})
        for (bool ties : {false, true})
          check(dev, 3, 300, k, 0.7f, ties, static_cast<uint64_t>(k) * 2 + ties);
      std::printf("%-8s softmax_topk 3 x 300, k in {1, 5, 40, all}, with and without ties: %s\n",
                  backend, failures ? "FAILED" : "ok");
    }
    // A 32k vocabulary, as a sampler sees it, tuned then checked.
    Device cpu("cpu", 2);
    TuneOptions o;
    o.shape = {{"rows", 2}, {"n", 32000}, {"k", 20}};
    o.floats = {{"temperature", 0.8}};
    o.budget_s = 3;
    TuneResult t = cpu.tune("softmax_topk", o);
    std::printf("tuned for rows=2, n=32000, k=20: BLOCK=%lld, %.4f ms (heuristic %.4f ms)\n",
                static_cast<long long>(t.best.constexprs.at("BLOCK")), t.best.median_ms,
                t.heuristic.median_ms);
    check(cpu, 2, 32000, 20, 0.8f, false, 7);
    std::printf("cpu      softmax_topk tuned, 2 x 32000, k=20: %s\n", failures ? "FAILED" : "ok");
  } catch (const Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return failures ? 1 : 0;
}
