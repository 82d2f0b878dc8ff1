#include "tools/bandwidth_probe.h"

#include <algorithm>
#include <atomic>
#include <chrono>

namespace kiln {

namespace {

// Eight independent lanes so the loop is limited by loads, not adds; cloned
// per ISA so the probe reads with the widest vectors the host has, as the
// kernels it is compared with do.
__attribute__((target_clones("avx512f", "avx2", "default"))) uint64_t sum_words(const uint64_t* p,
                                                                                int64_t begin,
                                                                                int64_t end) {
  uint64_t acc[8] = {};
  for (int64_t i = begin; i < end; ++i)
    for (int l = 0; l < 8; ++l) acc[l] += p[i * 8 + l];
  uint64_t s = 0;
  for (uint64_t a : acc) s ^= a;
  return s;
}

}  // namespace

BandwidthProbe::BandwidthProbe(int64_t bytes) : mem_(static_cast<size_t>(bytes / 64 * 64)) {
  auto* w = reinterpret_cast<uint64_t*>(mem_.data());
  for (size_t i = 0; i < mem_.size() / 8; ++i) w[i] = i * 0x9E3779B97F4A7C15ull;
}

uint64_t BandwidthProbe::read_once(ThreadPool& pool) const {
  std::atomic<uint64_t> total{0};
  const auto* p = reinterpret_cast<const uint64_t*>(mem_.data());
  pool.parallel_for(static_cast<int64_t>(mem_.size() / 64),
                    [&](int64_t b, int64_t e) { total.fetch_xor(sum_words(p, b, e)); });
  return total.load();
}

double BandwidthProbe::measure_gbps(ThreadPool& pool, int reps) const {
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    volatile uint64_t sink = read_once(pool);
    (void)sink;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes()) / s / 1e9);
  }
  return best;
}

}  // namespace kiln
