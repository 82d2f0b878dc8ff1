#include "tools/qgemv_workload.h"

#include <cmath>
#include <random>

namespace kiln {

QgemvWorkload::QgemvWorkload(int64_t m, int64_t k, ggml::QuantType fmt, uint64_t seed)
    : m_(m), k_(k) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0, 1);
  const ggml::BlockFormat& f = ggml::block_format(fmt);
  w_ = HostMemory(static_cast<size_t>(m * (k / f.block_elems) * f.block_bytes));
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t i = 0; i < m; ++i) {
    for (float& v : row) v = dist(rng);
    uint8_t* dst = w_.data() + i * (k / f.block_elems) * f.block_bytes;
    ggml::quantize(fmt, row.data(), k, dst);
  }
  xq_ = HostMemory(static_cast<size_t>(k));
  xd_ = HostMemory(static_cast<size_t>(k / 32 * 4));
  xs_ = HostMemory(static_cast<size_t>(k / 32 * 4));
  y_ = HostMemory(static_cast<size_t>(m * 4));
  auto* q = reinterpret_cast<int8_t*>(xq_.data());
  auto* d = reinterpret_cast<float*>(xd_.data());
  for (int64_t j = 0; j < k; ++j)
    q[j] = static_cast<int8_t>(static_cast<int>(dist(rng) * 40) % 127);
  for (int64_t b = 0; b < k / 32; ++b) d[b] = 0.01f;
}

std::vector<Arg> QgemvWorkload::args() {
  return {Arg::buffer(w_.data(), static_cast<int64_t>(w_.size())),
          Arg::buffer(xq_.data(), k_),
          Arg::buffer(xd_.data(), k_ / 32),
          Arg::buffer(xs_.data(), k_ / 32),
          Arg::buffer(y_.data(), m_),
          Arg::scalar_int(m_),
          Arg::scalar_int(k_)};
}

}  // namespace kiln
