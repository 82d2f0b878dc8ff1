#include "models/kld.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ir/error.h"

namespace kiln {

namespace {

// log-softmax of x in f64.
std::vector<double> log_softmax(const float* x, int64_t n) {
  double mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(x[i]));
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i]) - mx);
  const double lse = mx + std::log(s);
  std::vector<double> r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r[i] = static_cast<double>(x[i]) - lse;
  return r;
}

int64_t argmax(const float* x, int64_t n) { return std::max_element(x, x + n) - x; }

double error_of(double sum_sq_dev_mean, int64_t n) {
  return n > 1 ? std::sqrt(std::max(0.0, sum_sq_dev_mean) / static_cast<double>(n - 1)) : 0;
}

}  // namespace

double percentile_linear(std::vector<double> x, double q) {
  if (x.empty()) return 0;
  std::sort(x.begin(), x.end());
  const double pos = q / 100 * static_cast<double>(x.size() - 1);
  const size_t k = static_cast<size_t>(std::floor(pos));
  const double f = pos - static_cast<double>(k);
  return k + 1 < x.size() ? x[k] * (1 - f) + x[k + 1] * f : x[k];
}

void KldAccumulator::add(const float* base, const float* test, int64_t n_vocab, int32_t next) {
  if (n_vocab < 1) throw Error("KL divergence: an empty vocabulary");
  if (next >= n_vocab)
    throw Error("KL divergence: next token " + std::to_string(next) +
                " outside the vocabulary of " + std::to_string(n_vocab));
  std::vector<double> lp = log_softmax(base, n_vocab), lq = log_softmax(test, n_vocab);
  double kl = 0;
  for (int64_t v = 0; v < n_vocab; ++v)
    if (std::isfinite(lp[v])) kl += std::exp(lp[v]) * (lp[v] - lq[v]);
  if (!std::isfinite(kl))
    throw Error("KL divergence: non-finite logits at position " + std::to_string(kld_.size()));
  kld_.push_back(kl);
  same_ += argmax(base, n_vocab) == argmax(test, n_vocab);
  if (next >= 0) {
    dp_.push_back(std::exp(lq[next]) - std::exp(lp[next]));
    nll_base_ -= lp[next];
    nll_test_ -= lq[next];
    ++with_next_;
  }
}

KldStats KldAccumulator::finish() const {
  KldStats s;
  const int64_t n = static_cast<int64_t>(kld_.size());
  s.positions = n;
  if (n == 0) return s;
  double sum = 0, sum2 = 0;
  for (double k : kld_) sum += k, sum2 += k * k;
  s.mean_kld = sum / n;
  s.kld_error = error_of(sum2 / n - s.mean_kld * s.mean_kld, n);
  s.same_top = static_cast<double>(same_) / n;
  s.same_top_error = error_of(s.same_top * (1 - s.same_top), n);
  s.kld_max = percentile_linear(kld_, 100);
  s.kld_p999 = percentile_linear(kld_, 99.9);
  s.kld_p99 = percentile_linear(kld_, 99);
  s.kld_p95 = percentile_linear(kld_, 95);
  s.kld_p90 = percentile_linear(kld_, 90);
  s.kld_median = percentile_linear(kld_, 50);
  s.kld_min = percentile_linear(kld_, 0);
  if (!dp_.empty()) {
    double d = 0, d2 = 0;
    for (double x : dp_) d += x, d2 += x * x;
    s.mean_dp = d / static_cast<double>(dp_.size());
    s.rms_dp = std::sqrt(d2 / static_cast<double>(dp_.size()));
    s.ppl_base = std::exp(nll_base_ / static_cast<double>(with_next_));
    s.ppl_test = std::exp(nll_test_ / static_cast<double>(with_next_));
  }
  return s;
}

std::string KldStats::report() const {
  char buf[2048];
  std::snprintf(buf, sizeof buf,
                "====== Perplexity statistics ======\n"
                "Mean PPL(Q)                   : %10.6f\n"
                "Mean PPL(base)                : %10.6f\n"
                "\n"
                "====== KL divergence statistics ======\n"
                "Mean    KLD: %10.6f ± %10.6f\n"
                "Maximum KLD: %10.6f\n"
                "99.9%%   KLD: %10.6f\n"
                "99.0%%   KLD: %10.6f\n"
                "95.0%%   KLD: %10.6f\n"
                "90.0%%   KLD: %10.6f\n"
                "Median  KLD: %10.6f\n"
                "Minimum KLD: %10.6f\n"
                "\n"
                "====== Token probability statistics ======\n"
                "Mean    Δp: %8.3f %%\n"
                "RMS Δp    : %8.3f %%\n"
                "Same top p: %8.3f ± %6.3f %%\n"
                "Positions : %lld\n",
                ppl_test, ppl_base, mean_kld, kld_error, kld_max, kld_p999, kld_p99, kld_p95,
                kld_p90, kld_median, kld_min, 100 * mean_dp, 100 * rms_dp, 100 * same_top,
                100 * same_top_error, static_cast<long long>(positions));
  return buf;
}

std::string KldStats::json() const {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "{\"positions\": %lld, \"mean_kld\": %.9g, \"kld_error\": %.9g, "
                "\"same_top_p\": %.9g, \"same_top_p_error\": %.9g, \"kld_max\": %.9g, "
                "\"kld_99.9\": %.9g, \"kld_99\": %.9g, \"kld_95\": %.9g, \"kld_90\": %.9g, "
                "\"kld_median\": %.9g, \"kld_min\": %.9g, \"mean_dp\": %.9g, \"rms_dp\": %.9g, "
                "\"ppl_base\": %.9g, \"ppl_test\": %.9g}",
                static_cast<long long>(positions), mean_kld, kld_error, same_top, same_top_error,
                kld_max, kld_p999, kld_p99, kld_p95, kld_p90, kld_median, kld_min, mean_dp, rms_dp,
                ppl_base, ppl_test);
  return buf;
}

}  // namespace kiln
