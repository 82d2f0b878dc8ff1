#include "tools/qgemv_workload.h"

#include <numeric>
#include <random>

#include "ir/error.h"
#include "kernels/quant/iq_grids.h"
#include "kernels/quant/rows16.h"
#include "kernels/quant/split_sums.h"

namespace kiln {

QgemvWorkload::QgemvWorkload(int64_t m, int64_t k, TensorType fmt, int64_t tokens, bool rows16,
                             uint64_t seed)
    : m_(m), k_(k), t_(tokens), rows16_(rows16) {
  if (rows16 && !ggml::has_rows16(fmt))
    throw Error(std::string("no 16-row interleaved layout for ") +
                std::string(tensor_type_info(fmt).name));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0, 1);
  const TensorTypeInfo& f = tensor_type_info(fmt);
  w_ = HostMemory(static_cast<size_t>(m * (k / f.block_elems) * f.block_bytes));
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t i = 0; i < m; ++i) {
    for (float& v : row) v = dist(rng);
    uint8_t* dst = w_.data() + i * (k / f.block_elems) * f.block_bytes;
    ggml::sample_blocks(fmt, row.data(), k, seed + static_cast<uint64_t>(i), dst);
  }
  if (rows16) {
    HostMemory packed(static_cast<size_t>(ggml::rows16_bytes(fmt, m, k)));
    ggml::interleave_rows16(fmt, w_.data(), m, k, packed.data());
    w_ = std::move(packed);
  }
  x_ = HostMemory(static_cast<size_t>(t_ * k * 4));
  xq_ = HostMemory(static_cast<size_t>(t_ * k));
  xd_ = HostMemory(static_cast<size_t>(t_ * k / 32 * 4));
  xs_ = HostMemory(static_cast<size_t>(t_ * k / 32 * 4));
  xs8_ = HostMemory(static_cast<size_t>(split_sum_bytes(t_ * k / 32)));
  y_ = HostMemory(static_cast<size_t>(t_ * m * 4));
  auto* x = reinterpret_cast<float*>(x_.data());
  for (int64_t j = 0; j < t_ * k; ++j) x[j] = dist(rng);
}

LaunchArgs QgemvWorkload::quantize_args() {
  int64_t nb = t_ * k_ / 32;
  return {{"x", LaunchArg(x_.data(), t_ * k_, DType::f32)},
          {"q", LaunchArg(xq_.data(), t_ * k_, DType::i8)},
          {"d", LaunchArg(xd_.data(), nb, DType::f32)},
          {"s", LaunchArg(xs_.data(), nb, DType::i32)},
          {"s8", LaunchArg(xs8_.data(), split_sum_bytes(nb), DType::i8)},
          {"nblocks", nb}};
}

// The weights and the quantized activations of `tokens` tokens.
LaunchArgs QgemvWorkload::operands(int64_t tokens) {
  const int64_t blocks = tokens * k_ / 32;
  LaunchArgs a = {{"w", LaunchArg(w_.data(), static_cast<int64_t>(w_.size()), DType::u8)},
                  {"xq", LaunchArg(xq_.data(), tokens * k_, DType::i8)},
                  {"xd", LaunchArg(xd_.data(), blocks, DType::f32)},
                  {"xs", LaunchArg(xs_.data(), blocks, DType::i32)}};
  if (rows16_) a.emplace_back("xs8", LaunchArg(xs8_.data(), split_sum_bytes(blocks), DType::i8));
  return a;
}

LaunchArgs QgemvWorkload::args() {
  LaunchArgs a = operands(t_);
  a.insert(a.end(),
           {{"y", LaunchArg(y_.data(), t_ * m_, DType::f32)}, {"m", m_}, {"k", k_}, {"t", t_}});
  return a;
}

LaunchArgs QgemvWorkload::grouped_args(int64_t experts) {
  if (t_ != 1 || experts < 1 || m_ % experts)
    throw Error("grouped GEMV workload: " + std::to_string(m_) + " rows and " + std::to_string(t_) +
                " tokens cannot be one token through " + std::to_string(experts) + " experts");
  tile_expert_.resize(static_cast<size_t>(experts));
  std::iota(tile_expert_.begin(), tile_expert_.end(), 0);
  sorted_.assign(static_cast<size_t>(experts), 0);
  LaunchArgs a = operands(1);
  a.insert(a.end(), {{"y", LaunchArg(y_.data(), m_, DType::f32)},
                     {"m", m_ / experts},
                     {"k", k_},
                     {"t", experts},
                     {"tile_expert", tile_expert_},
                     {"sorted", sorted_},
                     {"n_expert", experts},
                     {"w_stride", weight_bytes() / experts},
                     {"tokens", int64_t{1}}});
  return a;
}

}  // namespace kiln
