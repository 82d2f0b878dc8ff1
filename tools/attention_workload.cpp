#include "tools/attention_workload.h"

#include <cmath>
#include <random>

#include "kernels/attention/kv_cache.h"
#include "tools/random_buffer.h"

namespace kiln {

AttentionWorkload::AttentionWorkload(int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                                     int64_t kv_len, int64_t key_block, DType kv, int64_t n_tokens,
                                     uint64_t seed)
    : h_(n_heads),
      kvh_(n_kv_heads),
      d_(head_dim),
      len_(kv_len),
      kb_(key_block),
      t_(n_tokens),
      kv_(kv) {
  std::mt19937_64 rng(seed);
  q_ = random_buffer(t_ * h_ * d_, DType::f32, rng);
  k_ = random_buffer(k_cache_elems(len_, kvh_, d_, kb_), kv_, rng);
  v_ = random_buffer(v_cache_elems(len_, kvh_, d_), kv_, rng);
  if (is_quantized_kv(kv_)) {
    k_scale_ = random_buffer(k_cache_elems(len_, kvh_, d_, kb_) / kKvQuantBlock, DType::f16, rng);
    v_scale_ = random_buffer(v_cache_elems(len_, kvh_, d_) / kKvQuantBlock, DType::f16, rng);
    // A q8_0 cache's kernels read q as Q8_0: codes, with their blocks'
    // scales and sums.
    const int64_t n = t_ * h_ * d_;
    q_ = HostMemory(static_cast<size_t>(n));
    q_sum_ = HostMemory(static_cast<size_t>(n / kKvQuantBlock * 4));
    q_scale_ = random_buffer(n / kKvQuantBlock, DType::f32, rng);
    std::uniform_int_distribution<int> code(-127, 127);
    auto* codes = reinterpret_cast<int8_t*>(q_.data());
    auto* sums = reinterpret_cast<int32_t*>(q_sum_.data());
    for (int64_t i = 0; i < n; ++i)
      sums[i / kKvQuantBlock] += codes[i] = static_cast<int8_t>(code(rng));
  }
  out_ = HostMemory(static_cast<size_t>(t_ * h_ * d_ * 4));
}

std::vector<Arg> AttentionWorkload::args() {
  std::vector<Arg> a = {Arg::buffer(q_.data(), t_ * h_ * d_),
                        Arg::buffer(k_.data(), k_cache_elems(len_, kvh_, d_, kb_)),
                        Arg::buffer(v_.data(), v_cache_elems(len_, kvh_, d_)),
                        Arg::buffer(out_.data(), t_ * h_ * d_),
                        Arg::scalar_int(t_),
                        Arg::scalar_int(h_),
                        Arg::scalar_int(kvh_),
                        Arg::scalar_int(len_),
                        Arg::scalar_int(len_),
                        Arg::scalar_int(len_ - t_),
                        Arg::scalar_float(1.0 / std::sqrt(static_cast<double>(d_))),
                        Arg::scalar_int(0)};  // no sliding window
  if (is_quantized_kv(kv_)) {
    a.push_back(Arg::buffer(k_scale_.data(), k_cache_elems(len_, kvh_, d_, kb_) / kKvQuantBlock));
    a.push_back(Arg::buffer(v_scale_.data(), v_cache_elems(len_, kvh_, d_) / kKvQuantBlock));
    a.push_back(Arg::buffer(q_scale_.data(), t_ * h_ * d_ / kKvQuantBlock));
    a.push_back(Arg::buffer(q_sum_.data(), t_ * h_ * d_ / kKvQuantBlock));
  }
  return a;
}

int64_t AttentionWorkload::partial_rows(int64_t split) {
  const int64_t rows = h_ * ((len_ + split - 1) / split);
  if (part_o_.size() < static_cast<size_t>(rows * d_ * 4)) {
    part_o_ = HostMemory(static_cast<size_t>(rows * d_ * 4));
    part_ml_ = HostMemory(static_cast<size_t>(rows * 2 * 4));
  }
  return rows;
}

std::vector<Arg> AttentionWorkload::split_args(int64_t split) {
  std::vector<Arg> a = args();
  const int64_t rows = partial_rows(split);
  a[3] = Arg::buffer(part_o_.data(), rows * d_);
  a.insert(a.begin() + 4, Arg::buffer(part_ml_.data(), rows * 2));
  return a;
}

std::vector<Arg> AttentionWorkload::merge_args(int64_t split) {
  const int64_t rows = partial_rows(split);
  return {Arg::buffer(part_o_.data(), rows * d_),
          Arg::buffer(part_ml_.data(), rows * 2),
          Arg::buffer(out_.data(), h_ * d_),
          Arg::scalar_int(1),
          Arg::scalar_int(h_),
          Arg::scalar_int(len_),
          Arg::scalar_int(len_),
          Arg::scalar_int(len_ - 1),
          Arg::scalar_int(0)};
}

double AttentionWorkload::causal_macs() const {
  // Token i of the t_ newest sees len_ - t_ + i + 1 keys.
  const double first = static_cast<double>(len_ - t_ + 1), last = static_cast<double>(len_);
  return 2.0 * static_cast<double>(h_ * d_) * (first + last) / 2 * static_cast<double>(t_);
}

int64_t AttentionWorkload::cache_bytes() const {
  const int64_t codes = 2 * len_ * kvh_ * d_ * dtype_bytes(kv_);
  return is_quantized_kv(kv_) ? codes + codes / kKvQuantBlock * 2 : codes;
}

int64_t AttentionWorkload::cache_buffer_bytes() const {
  const int64_t v = len_ * kvh_ * d_ * dtype_bytes(kv_);
  return is_quantized_kv(kv_) ? v / kKvQuantBlock * 2 : v;
}

}  // namespace kiln
