#include "tools/bandwidth_probe.h"

#include <algorithm>
#include <atomic>
#include <chrono>

namespace kiln {

BandwidthProbe::BandwidthProbe(int64_t bytes) : words_(static_cast<size_t>(bytes / 8)) {
  for (size_t i = 0; i < words_.size(); ++i) words_[i] = i * 0x9E3779B97F4A7C15ull;
}

uint64_t BandwidthProbe::read_once(ThreadPool& pool) const {
  std::atomic<uint64_t> total{0};
  const uint64_t* p = words_.data();
  pool.parallel_for(static_cast<int64_t>(words_.size() / 8), [&](int64_t b, int64_t e) {
    // Eight independent lanes so the loop is limited by loads, not adds.
    uint64_t acc[8] = {};
    for (int64_t i = b; i < e; ++i)
      for (int l = 0; l < 8; ++l) acc[l] += p[i * 8 + l];
    uint64_t s = 0;
    for (uint64_t a : acc) s ^= a;
    total.fetch_xor(s);
  });
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
