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

LaunchArgs AttentionWorkload::args() {
  const bool aura = is_aura_kv(kv_.dtype);
  // The queries are f32, or q8_0 blocks (i8 codes) against a q8_0 cache.
  const DType q = is_quantized_kv(kv_.dtype) ? DType::i8 : DType::f32;
  LaunchArgs a = {{"q", LaunchArg(q_.data(), t_ * h_ * d_, q)},
                  {"k", LaunchArg(k_.data(), aura ? static_cast<int64_t>(k_.size() / 4) : k_elems(),
                                  kv_.dtype)},
                  {"v", LaunchArg(v_.data(), aura ? static_cast<int64_t>(v_.size() / 4) : v_elems(),
                                  kv_.dtype)},
                  {"out", LaunchArg(out_.data(), t_ * h_ * d_, DType::f32)},
                  {"n_tokens", t_},
                  {"n_heads", h_},
                  {"n_kv_heads", kvh_},
                  {"max_ctx", len_},
                  {"kv_len", len_},
                  {"pos0", len_ - t_},
                  {"scale", 1.0 / std::sqrt(static_cast<double>(d_))},
                  {"window", int64_t{0}}};  // no sliding window
  if (page_) {
    const auto pages = static_cast<int64_t>(table_.size() / 4);
    a.emplace_back("block_table", LaunchArg(table_.data(), pages, DType::i32));
    a.emplace_back("n_pages", pages);
  }
  if (aura) {
    a.emplace_back("k_scale", LaunchArg(k_scale_.data(), len_ * kvh_, DType::f16));
    a.emplace_back("v_scale", LaunchArg(v_scale_.data(), len_ * kvh_, DType::f16));
  }
  if (is_quantized_kv(kv_.dtype)) {
    const int64_t q_blocks = t_ * h_ * d_ / kKvQuantBlock;
    a.emplace_back("k_scale", LaunchArg(k_scale_.data(), k_elems() / kKvQuantBlock, DType::f16));
    a.emplace_back("v_scale", LaunchArg(v_scale_.data(), v_elems() / kKvQuantBlock, DType::f16));
    a.emplace_back("q_scale", LaunchArg(q_scale_.data(), q_blocks, DType::f32));
    a.emplace_back("q_sum", LaunchArg(q_sum_.data(), q_blocks, DType::i32));
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

LaunchArgs AttentionWorkload::split_args(int64_t split) {
  LaunchArgs a = args();
  const int64_t rows = partial_rows(split);
  std::erase_if(a, [](const auto& named) { return named.first == "out"; });
  a.emplace_back("part_o", LaunchArg(part_o_.data(), rows * d_, DType::f32));
  a.emplace_back("part_ml", LaunchArg(part_ml_.data(), rows * 2, DType::f32));
  return a;
}

LaunchArgs AttentionWorkload::merge_args(int64_t split) {
  const int64_t rows = partial_rows(split);
  return {{"part_o", LaunchArg(part_o_.data(), rows * d_, DType::f32)},
          {"part_ml", LaunchArg(part_ml_.data(), rows * 2, DType::f32)},
          {"out", LaunchArg(out_.data(), h_ * d_, DType::f32)},
          {"n_tokens", int64_t{1}},
          {"n_heads", h_},
          {"max_ctx", len_},
          {"kv_len", len_},
          {"pos0", len_ - 1},
          {"window", int64_t{0}}};
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
