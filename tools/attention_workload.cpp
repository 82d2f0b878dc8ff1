#include "tools/attention_workload.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>

#include "ir/error.h"
#include "kernels/attention/kv_cache.h"
#include "tools/random_buffer.h"

namespace kiln {

AttentionWorkload::AttentionWorkload(int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                                     int64_t kv_len, int64_t key_block, KvCacheType kv,
                                     int64_t n_tokens, int64_t page, uint64_t seed)
    : h_(n_heads),
      kvh_(n_kv_heads),
      d_(head_dim),
      len_(kv_len),
      kb_(key_block),
      t_(n_tokens),
      page_(page),
      kv_(kv) {
  if (page_ > 0 && is_aura_kv(kv_.dtype))
    throw Error("an AURA cache is not paged (--kv-page with --kv " + kv_cache_type_name(kv_) + ")");
  if (page_ < 0 || page_ % key_block)
    throw Error("--kv-page expects a multiple of the key block (" + std::to_string(key_block) +
                "), got " + std::to_string(page_));
  std::mt19937_64 rng(seed);
  if (page_ > 0) {
    std::vector<int32_t> order(static_cast<size_t>((len_ + page_ - 1) / page_));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::shuffle(order.begin(), order.end(), rng);
    table_ = HostMemory(order.size() * 4);
    std::memcpy(table_.data(), order.data(), order.size() * 4);
  }
  q_ = random_buffer(t_ * h_ * d_, DType::f32, rng);
  out_ = HostMemory(static_cast<size_t>(t_ * h_ * d_ * 4));
  if (is_aura_kv(kv_.dtype)) {
    // Random code words (every code), norms in [-1, 1]; q rotated, f32.
    for (auto [mem, bits] : {std::pair{&k_, kv_.aura.kbits}, std::pair{&v_, kv_.aura.vbits}}) {
      *mem = HostMemory(static_cast<size_t>(4 * len_ * kvh_ * packed_words(d_, bits)));
      auto* w = reinterpret_cast<uint32_t*>(mem->data());
      for (size_t i = 0; i < mem->size() / 4; ++i) w[i] = static_cast<uint32_t>(rng());
    }
    k_scale_ = random_buffer(len_ * kvh_, DType::f16, rng);
    v_scale_ = random_buffer(len_ * kvh_, DType::f16, rng);
    return;
  }
  k_ = random_buffer(k_elems(), kv_.dtype, rng);
  v_ = random_buffer(v_elems(), kv_.dtype, rng);
  if (is_quantized_kv(kv_.dtype)) {
    k_scale_ = random_buffer(k_elems() / kKvQuantBlock, DType::f16, rng);
    v_scale_ = random_buffer(v_elems() / kKvQuantBlock, DType::f16, rng);
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
}

int64_t AttentionWorkload::k_elems() const {
  return page_ ? k_pool_elems((len_ + page_ - 1) / page_, kvh_, d_, page_)
               : k_cache_elems(len_, kvh_, d_, kb_);
}

int64_t AttentionWorkload::v_elems() const {
  return page_ ? v_pool_elems((len_ + page_ - 1) / page_, kvh_, d_, page_)
               : v_cache_elems(len_, kvh_, d_);
}

std::map<std::string, int64_t> AttentionWorkload::kv_constexprs() const {
  if (is_aura_kv(kv_.dtype)) return {{"KBITS", kv_.aura.kbits}, {"VBITS", kv_.aura.vbits}};
  if (page_) return {{"PAGE", page_}};
  return {};
}

std::vector<Arg> AttentionWorkload::args() {
  const bool aura = is_aura_kv(kv_.dtype);
  std::vector<Arg> a = {
      Arg::buffer(q_.data(), t_ * h_ * d_),
      Arg::buffer(k_.data(), aura ? static_cast<int64_t>(k_.size() / 4) : k_elems()),
      Arg::buffer(v_.data(), aura ? static_cast<int64_t>(v_.size() / 4) : v_elems()),
      Arg::buffer(out_.data(), t_ * h_ * d_),
      Arg::scalar_int(t_),
      Arg::scalar_int(h_),
      Arg::scalar_int(kvh_),
      Arg::scalar_int(len_),
      Arg::scalar_int(len_),
      Arg::scalar_int(len_ - t_),
      Arg::scalar_float(1.0 / std::sqrt(static_cast<double>(d_))),
      Arg::scalar_int(0)};  // no sliding window
  if (page_) {
    a.push_back(Arg::buffer(table_.data(), static_cast<int64_t>(table_.size() / 4)));
    a.push_back(Arg::scalar_int(static_cast<int64_t>(table_.size() / 4)));
  }
  if (aura) {
    a.push_back(Arg::buffer(k_scale_.data(), len_ * kvh_));
    a.push_back(Arg::buffer(v_scale_.data(), len_ * kvh_));
  }
  if (is_quantized_kv(kv_.dtype)) {
    a.push_back(Arg::buffer(k_scale_.data(), k_elems() / kKvQuantBlock));
    a.push_back(Arg::buffer(v_scale_.data(), v_elems() / kKvQuantBlock));
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
  if (is_aura_kv(kv_.dtype)) return len_ * aura_bytes_per_token(kvh_, d_, kv_.aura);
  const int64_t codes = 2 * len_ * kvh_ * d_ * dtype_bytes(kv_.dtype);
  return is_quantized_kv(kv_.dtype) ? codes + codes / kKvQuantBlock * 2 : codes;
}

int64_t AttentionWorkload::cache_buffer_bytes() const {
  if (is_aura_kv(kv_.dtype)) return len_ * kvh_ * 2;  // the norms
  const int64_t v = len_ * kvh_ * d_ * dtype_bytes(kv_.dtype);
  return is_quantized_kv(kv_.dtype) ? v / kKvQuantBlock * 2 : v;
}

}  // namespace kiln
