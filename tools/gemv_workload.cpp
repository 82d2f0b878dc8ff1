#include "tools/gemv_workload.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "ir/scalar_eval.h"
#include "tools/random_buffer.h"

namespace kiln {

GemvWorkload::GemvWorkload(int64_t m, int64_t k, DType w, DType x, uint64_t seed,
                           int64_t scale_block)
    : m_(m), k_(k), block_(scale_block), wt_(w), xt_(x) {
  std::mt19937_64 rng(seed);
  w_ = random_buffer(m * k, w, rng);
  x_ = random_buffer(k, x, rng);
  y_ = HostMemory(static_cast<size_t>(m * dtype_bytes(x)));
  if (block_) {
    ws_ = HostMemory(static_cast<size_t>(scales() * 4));
    std::uniform_real_distribution<float> d(1e-3f, 1e-2f);
    for (int64_t i = 0; i < scales(); ++i) reinterpret_cast<float*>(ws_.data())[i] = d(rng);
  }
}

int64_t GemvWorkload::scales() const {
  return block_ ? (m_ + block_ - 1) / block_ * ((k_ + block_ - 1) / block_) : 0;
}

float GemvWorkload::scale(int64_t i, int64_t j) const {
  if (!block_) return 1;
  return reinterpret_cast<const float*>(
      ws_.data())[i / block_ * ((k_ + block_ - 1) / block_) + j / block_];
}

LaunchArgs GemvWorkload::weights() {
  // gemv and gemm read FP8 weights as raw bytes.
  const DType w = dtype_bytes(wt_) == 1 ? DType::u8 : wt_;
  LaunchArgs a = {{"w", LaunchArg(w_.data(), m_ * k_, w)}};
  if (block_) a.emplace_back("ws", LaunchArg(ws_.data(), scales(), DType::f32));
  return a;
}

LaunchArgs GemvWorkload::args() {
  LaunchArgs a = weights();
  a.insert(a.end(), {{"x", LaunchArg(x_.data(), k_, xt_)},
                     {"y", LaunchArg(y_.data(), m_, xt_)},
                     {"m", m_},
                     {"k", k_}});
  return a;
}

int64_t GemvWorkload::bytes() const {
  return (m_ * k_) * dtype_bytes(wt_) + (k_ + m_) * dtype_bytes(xt_) + scales() * 4;
}

double GemvWorkload::relative_error() const {
  std::vector<double> xs(k_);
  for (int64_t j = 0; j < k_; ++j) xs[j] = load_element(x_.data(), j, xt_).f;
  double max_err = 0, max_ref = 0;
  for (int64_t i = 0; i < m_; ++i) {
    double ref = 0;
    for (int64_t j = 0; j < k_; ++j)
      ref += load_element(w_.data(), i * k_ + j, wt_).f * scale(i, j) * xs[j];
    max_err = std::max(max_err, std::fabs(load_element(y_.data(), i, xt_).f - ref));
    max_ref = std::max(max_ref, std::fabs(ref));
  }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

}  // namespace kiln
