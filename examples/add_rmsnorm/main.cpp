// Checks add_rmsnorm against a float64 reference on the CPU and on the CUDA
// simulator (and on a GPU where one is present), in f32 and f16, then tunes
// its block size and runs the tuned kernel. Exit status 0: every check held.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "add_rmsnorm.h"

using namespace kiln;

namespace {

int failures = 0;

// The kernel sums n squares in f32 in another order than the reference:
// each result may differ by a few f32 ulps times sqrt(n), well inside 1e-4
// of the value (f16 storage: one f16 ulp, 2^-11, on top).
void expect_near(const char* what, double got, double want, double rtol) {
  if (std::fabs(got - want) <= rtol * (std::fabs(want) + 1e-3)) return;
  if (++failures <= 5) std::printf("  MISMATCH %s: got %.7g, want %.7g\n", what, got, want);
}

struct Case {
  int64_t rows, n;
  float eps = 1e-5f;
  std::vector<float> x, res, w;
};

Case make_case(int64_t rows, int64_t n, uint64_t seed) {
  Case c{rows, n};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2, 2);
  for (int64_t i = 0; i < rows * n; ++i) c.x.push_back(u(rng)), c.res.push_back(u(rng));
  for (int64_t i = 0; i < n; ++i) c.w.push_back(u(rng));
  return c;
}

// h = x + res and y, in double from the inputs as `round` stores them.
void reference(const Case& c, float (*round)(float), std::vector<double>& h,
               std::vector<double>& y) {
  h.assign(c.x.size(), 0);
  y.assign(c.x.size(), 0);
  for (int64_t r = 0; r < c.rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < c.n; ++i) {
      size_t at = static_cast<size_t>(r * c.n + i);
      h[at] = round(round(c.x[at]) + round(c.res[at]));
      ss += h[at] * h[at];
    }
    double inv = 1 / std::sqrt(ss / static_cast<double>(c.n) + c.eps);
    for (int64_t i = 0; i < c.n; ++i) {
      size_t at = static_cast<size_t>(r * c.n + i);
      y[at] = h[at] * inv * round(c.w[static_cast<size_t>(i)]);
    }
  }
}

float as_f32(float v) { return v; }
float as_f16(float v) { return f16_bits_to_f32(f32_to_f16_bits(v)); }

std::vector<uint16_t> to_f16(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float f : v) out.push_back(f32_to_f16_bits(f));
  return out;
}

void check_f32(Device& dev, const Case& c) {
  std::vector<double> h, want;
  reference(c, as_f32, h, want);
  std::vector<float> res = c.res, y(c.x.size()), x = c.x, w = c.w;
  dev.launch(
      "add_rmsnorm",
      {{"x", x}, {"res", res}, {"w", w}, {"y", y}, {"n", c.n}, {"eps", c.eps}, {"rows", c.rows}});
  for (size_t i = 0; i < y.size(); ++i) {
    expect_near("res", res[i], h[i], 1e-6);
    expect_near("y", y[i], want[i], 1e-4);
  }
}

void check_f16(Device& dev, const Case& c) {
  std::vector<double> h, want;
  reference(c, as_f16, h, want);
  std::vector<uint16_t> x = to_f16(c.x), res = to_f16(c.res), w = to_f16(c.w), y(c.x.size());
  dev.launch(
      "add_rmsnorm",
      {{"x", x}, {"res", res}, {"w", w}, {"y", y}, {"n", c.n}, {"eps", c.eps}, {"rows", c.rows}},
      {{"T", DType::f16}});
  for (size_t i = 0; i < y.size(); ++i) {
    expect_near("res", f16_bits_to_f32(res[i]), h[i], 0);
    expect_near("y", f16_bits_to_f32(y[i]), want[i], 1e-3);
  }
}

}  // namespace

int main() {
  try {
    register_kernel(add_rmsnorm_def());
    // 1000 is no multiple of any block: every launch has a masked tail.
    const Case small = make_case(5, 1000, 1);
    for (const char* backend : {"cpu", "cuda-sim"}) {
      Device dev(backend, 2);
      check_f32(dev, small);
      check_f16(dev, small);
      std::printf("%-8s add_rmsnorm f32 and f16, 5 x 1000: %s\n", backend,
                  failures ? "FAILED" : "ok");
    }

    // Tune the block size for a 4096-wide row, then launch with the choice.
    Device cpu("cpu", 2);
    TuneOptions o;
    o.shape = {{"rows", 16}, {"n", 4096}};
    o.budget_s = 3;
    TuneResult t = cpu.tune("add_rmsnorm", o);
    std::printf("tuned for rows=16, n=4096: BLOCK=%lld, %.4f ms (heuristic %.4f ms)\n",
                static_cast<long long>(t.best.constexprs.at("BLOCK")), t.best.median_ms,
                t.heuristic.median_ms);
    const Case wide = make_case(16, 4096, 2);
    std::vector<float> probe(16 * 4096);
    Spec chosen = cpu.select("add_rmsnorm", {{"x", probe},
                                             {"res", probe},
                                             {"w", probe},
                                             {"y", probe},
                                             {"n", int64_t{4096}},
                                             {"eps", 1e-5f},
                                             {"rows", int64_t{16}}});
    if (chosen.constexpr_("BLOCK") != t.best.constexprs.at("BLOCK")) {
      std::printf("  the tuned BLOCK was not selected (%s)\n", chosen.str().c_str());
      ++failures;
    }
    check_f32(cpu, wide);
    std::printf("cpu      add_rmsnorm tuned, 16 x 4096: %s\n", failures ? "FAILED" : "ok");

    // The code it became, for this CPU and for a GPU.
    std::string assembly = generated_code(chosen, CodeForm::assembly);
    CodeTarget gpu{"cuda", 90};
    std::string cuda = generated_code(code_spec("add_rmsnorm", {}, {}, gpu), CodeForm::cuda, gpu);
    std::printf("generated: %zu bytes of host assembly, %zu bytes of CUDA C\n", assembly.size(),
                cuda.size());
  } catch (const Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return failures ? 1 : 0;
}
