#include "tools/int4_workload.h"

#include <cstring>
#include <random>

#include "ir/dtype.h"
#include "kernels/quant/awq.h"

namespace kiln {

namespace {
HostMemory copy_of(const void* p, size_t bytes) {
  HostMemory m(bytes);
  std::memcpy(m.data(), p, bytes);
  return m;
}

// gemv_int4w's activation and output buffers (xq, xd, xs, y) after its
// weights (memory[0..2]), and the launch arguments over all of them.
void add_int4w_x_and_args(Int4Workload& w, int64_t m, int64_t k, int64_t q_bytes, int64_t n_scales,
                          int64_t n_zeros, std::mt19937_64& rng) {
  w.memory.emplace_back(static_cast<size_t>(k));           // x: 8-bit blocks
  w.memory.emplace_back(static_cast<size_t>(k / 32 * 4));  // x block scales
  w.memory.emplace_back(static_cast<size_t>(k / 32 * 4));  // x block sums
  w.memory.emplace_back(static_cast<size_t>(m * 4));       // y
  for (size_t i = 0; i < w.memory[3].size(); ++i)
    w.memory[3].data()[i] = static_cast<uint8_t>(rng() % 255 - 127);
  auto* d = reinterpret_cast<float*>(w.memory[4].data());
  for (int64_t b = 0; b < k / 32; ++b) d[b] = 0.01f;
  w.args = {Arg::buffer(w.memory[0].data(), q_bytes),
            Arg::buffer(w.memory[1].data(), n_scales),
            Arg::buffer(w.memory[2].data(), n_zeros),
            Arg::buffer(w.memory[3].data(), k),
            Arg::buffer(w.memory[4].data(), k / 32),
            Arg::buffer(w.memory[5].data(), k / 32),
            Arg::buffer(w.memory[6].data(), m),
            Arg::scalar_int(m),
            Arg::scalar_int(k),
            Arg::scalar_int(1)};
}
}  // namespace

Int4Workload int4w_workload(int64_t m, int64_t k) {
  const int64_t group = 128;
  std::mt19937_64 rng(1);
  Int4Workload w{"gemv_int4w", {{"GROUP", group}, {"ZP", 0}}, {}, {}, 0};
  w.memory.emplace_back(static_cast<size_t>(m * k / 2));          // q
  w.memory.emplace_back(static_cast<size_t>(m * k / group * 2));  // scales
  w.memory.emplace_back(size_t{1});                               // no zero points
  for (size_t i = 0; i < w.memory[0].size(); ++i)
    w.memory[0].data()[i] = static_cast<uint8_t>(rng());
  auto* s = reinterpret_cast<uint16_t*>(w.memory[1].data());
  for (int64_t i = 0; i < m * k / group; ++i) s[i] = f32_to_f16_bits(0.01f);
  add_int4w_x_and_args(w, m, k, m * k / 2, m * k / group, 0, rng);
  w.weight_bytes = m * k / 2 + m * k / group * 2;
  return w;
}

Int4Workload awq_workload(int64_t m, int64_t k) {
  const int64_t group = 128;
  std::mt19937_64 rng(2);
  std::normal_distribution<float> dist(0, 1);
  std::vector<float> wf(static_cast<size_t>(k * m));
  for (float& v : wf) v = dist(rng);
  AwqWeights a = awq_pack(wf.data(), k, m, group);
  Int4Workload w{"gemv_awq", {{"GROUP", group}}, {}, {}, 0};
  w.memory.push_back(copy_of(a.qweight.data(), a.qweight.size() * 4));
  w.memory.push_back(copy_of(a.qzeros.data(), a.qzeros.size() * 4));
  w.memory.push_back(copy_of(a.scales.data(), a.scales.size() * 2));
  w.memory.emplace_back(static_cast<size_t>(k * 4));
  w.memory.emplace_back(static_cast<size_t>(m * 4));
  w.args = {Arg::buffer(w.memory[0].data(), static_cast<int64_t>(a.qweight.size())),
            Arg::buffer(w.memory[1].data(), static_cast<int64_t>(a.qzeros.size())),
            Arg::buffer(w.memory[2].data(), static_cast<int64_t>(a.scales.size())),
            Arg::buffer(w.memory[3].data(), k),
            Arg::buffer(w.memory[4].data(), m),
            Arg::scalar_int(k),
            Arg::scalar_int(m)};
  w.weight_bytes =
      static_cast<int64_t>(a.qweight.size() * 4 + a.qzeros.size() * 4 + a.scales.size() * 2);
  return w;
}

Int4Workload awq_int4w_workload(int64_t m, int64_t k) {
  const int64_t group = 128;
  std::mt19937_64 rng(2);
  std::normal_distribution<float> dist(0, 1);
  std::vector<float> wf(static_cast<size_t>(k * m));
  for (float& v : wf) v = dist(rng);
  Int4wRows r = awq_to_int4w(awq_pack(wf.data(), k, m, group));
  Int4Workload w{"gemv_int4w", {{"GROUP", group}, {"ZP", 1}}, {}, {}, 0};
  w.memory.push_back(copy_of(r.q.data(), r.q.size()));
  w.memory.push_back(copy_of(r.scales.data(), r.scales.size() * 2));
  w.memory.push_back(copy_of(r.zeros.data(), r.zeros.size()));
  add_int4w_x_and_args(w, m, k, static_cast<int64_t>(r.q.size()),
                       static_cast<int64_t>(r.scales.size()), static_cast<int64_t>(r.zeros.size()),
                       rng);
  w.weight_bytes = static_cast<int64_t>(r.q.size() + r.scales.size() * 2 + r.zeros.size());
  return w;
}

}  // namespace kiln
