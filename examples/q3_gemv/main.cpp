// Checks q3_gemv against a float64 product of the decoded weights on the CPU
// and the CUDA simulator (and a GPU where one is present), refuses a width
// that is no whole number of blocks, then tunes it for a 1024 x 4096 matrix
// and compares its speed with the f32 GEMV of the same shape that ships with
// Kiln (the q3 matrix is 10x fewer bytes). Exit status 0: every check held.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "q3_gemv.h"

using namespace kiln;

namespace {

int failures = 0;

// The kernel decodes exactly (3-bit codes, f16 scales) and sums k products
// in f32 in another order than the float64 reference: 1e-5 of the sum of
// |w x| covers k = 4096 comfortably (f32 epsilon 6e-8 times sqrt-growth).
void check(Device& dev, int64_t rows, int64_t k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> w(static_cast<size_t>(rows * k)), x(static_cast<size_t>(k)),
      y(static_cast<size_t>(rows));
  for (float& v : w) v = g(rng);
  for (float& v : x) v = g(rng);
  Q3Matrix m = q3_quantize(w, rows, k);
  dev.launch("q3_gemv", {{"q", m.q}, {"d", m.d}, {"x", x}, {"y", y}, {"k", k}, {"m", rows}});
  for (int64_t r = 0; r < rows; ++r) {
    double want = 0, scale = 0;
    for (int64_t c = 0; c < k; ++c) {
      want += static_cast<double>(q3_weight(m, r, c)) * x[static_cast<size_t>(c)];
      scale += std::fabs(static_cast<double>(q3_weight(m, r, c)) * x[static_cast<size_t>(c)]);
    }
    if (!(std::fabs(y[static_cast<size_t>(r)] - want) <= 1e-5 * scale) && ++failures <= 5)
      std::printf("  MISMATCH %lld x %lld: y[%lld] = %.7g, want %.7g\n",
                  static_cast<long long>(rows), static_cast<long long>(k),
                  static_cast<long long>(r), y[static_cast<size_t>(r)], want);
  }
}

}  // namespace

int main() {
  try {
    register_kernel(q3_gemv_def());
    for (const char* backend : {"cpu", "cuda-sim"}) {
      Device dev(backend, 2);
      check(dev, 9, 96, 1);  // 96: a tail of 32 after a 64-weight block
      check(dev, 4, 1024, 2);
      std::printf("%-8s q3_gemv 9 x 96 and 4 x 1024: %s\n", backend, failures ? "FAILED" : "ok");
    }
    Device cpu("cpu", 2);
    try {
      check(cpu, 2, 100, 3);
      std::printf("  a width of 100 was accepted\n");
      ++failures;
    } catch (const Error& e) {
      std::printf("k = 100 refused: %s\n", e.what());
    }

    TuneOptions o;
    o.shape = {{"m", 1024}, {"k", 4096}};
    o.budget_s = 4;
    TuneResult t = cpu.tune("q3_gemv", o);
    check(cpu, 64, 4096, 4);
    std::printf("cpu      q3_gemv tuned, 64 x 4096: %s\n", failures ? "FAILED" : "ok");
    // The library's f32 GEMV on the same shape, measured the same way.
    TuneOptions f32;
    f32.shape = {{"m", 1024}, {"k", 4096}};
    Measurement gemv = measure(cpu.runtime(), "gemv", f32);
    std::printf(
        "1024 x 4096 on 2 threads: q3_gemv BLOCK_K=%lld %.3f ms (%.2f MB), gemv f32 %.3f ms (%.2f "
        "MB)\n",
        static_cast<long long>(t.best.constexprs.at("BLOCK_K")), t.best.median_ms, t.bytes / 1e6,
        gemv.trial.median_ms, gemv.bytes / 1e6);
  } catch (const Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return failures ? 1 : 0;
}
