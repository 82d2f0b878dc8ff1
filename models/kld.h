// The KL-divergence quality harness (shared/design/AURA.md section 8): how
// far a model run differs from a base run over the same tokens, position
// by position, as llama-perplexity's --kl-divergence reports it.
//
// Per scored position, base logits a and test logits b over the full
// vocabulary (f64 math): log P = a - logsumexp(a), log Q likewise,
// KL = sum_v P_v (log P_v - log Q_v) over every term (llama.cpp skips
// those with log P_v <= -16); whether the argmaxes agree; and
// dp = Q(next) - P(next) for the token that follows. KldStats summarises N
// positions: mean KL with its standard error sqrt((mean(KL^2) - mean^2) /
// (N - 1)), same-top with sqrt(p (1 - p) / (N - 1)), KL percentiles with
// numpy's "linear" interpolation, RMS dp, and both runs' perplexities.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct KldStats {
  int64_t positions = 0;
  double mean_kld = 0, kld_error = 0;
  double same_top = 0, same_top_error = 0;  // fractions, not percent
  // Percentiles of KL: 100 (maximum), 99.9, 99, 95, 90, 50 (median), 0 (minimum).
  double kld_max = 0, kld_p999 = 0, kld_p99 = 0, kld_p95 = 0, kld_p90 = 0, kld_median = 0,
         kld_min = 0;
  double mean_dp = 0, rms_dp = 0;
  double ppl_base = 0, ppl_test = 0;  // exp(mean -log p(next))

  // llama-perplexity's field names and layout.
  std::string report() const;
  std::string json() const;
};

class KldAccumulator {
 public:
  // One position: base and test logits [n_vocab] and the next token (-1:
  // none known, which leaves it out of dp and the perplexities).
  void add(const float* base, const float* test, int64_t n_vocab, int32_t next);
  KldStats finish() const;

 private:
  std::vector<double> kld_, dp_;
  int64_t same_ = 0;
  double nll_base_ = 0, nll_test_ = 0;
  int64_t with_next_ = 0;
};

// numpy.percentile(x, q) with the default "linear" method: x[k](1 - f) +
// x[k + 1] f for k + f = q / 100 * (N - 1), x sorted.
double percentile_linear(std::vector<double> x, double q);

}  // namespace kiln
