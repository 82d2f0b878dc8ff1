#include "tools/int4_workload.h"

#include <cstring>
#include <random>

#include "ir/dtype.h"
#include "ir/error.h"
#include "kernels/quant/awq.h"
#include "kernels/quant/int4w.h"
#include "kernels/quant/split_sums.h"

namespace kiln {

namespace {
constexpr int64_t kGroup = 128;

HostMemory copy_of(const void* p, size_t bytes) {
  HostMemory m(bytes);
  std::memcpy(m.data(), p, bytes);
  return m;
}

// Random codes with scales 0.01 and no zero points.
Int4wRows random_int4w(int64_t m, int64_t k) {
  std::mt19937_64 rng(1);
  Int4wRows r{m,      k,
              kGroup, std::vector<uint8_t>(m * k / 2),
              {},     std::vector<uint16_t>(m * k / kGroup, f32_to_f16_bits(0.01f))};
  for (auto& b : r.q) b = static_cast<uint8_t>(rng());
  return r;
}

AwqWeights random_awq(int64_t m, int64_t k) {
  std::mt19937_64 rng(2);
  std::normal_distribution<float> dist(0, 1);
  std::vector<float> wf(static_cast<size_t>(k * m));
  for (float& v : wf) v = dist(rng);
  return awq_pack(wf.data(), k, m, kGroup);
}

// The activation and output buffers (xq, xd, xs, y) after the weights'
// buffers, and the launch arguments: `args` (the weights'), these, m, k
// and t; and an f32 x with its quantize_q8 arguments (into xq, xd, xs and
// split sums the int4w kernels do not read).
void add_x_and_args(Int4Workload& w, LaunchArgs args, int64_t m, int64_t k, int64_t t) {
  const int64_t nb = t * k / 32;
  const size_t x = w.memory.size();
  w.memory.emplace_back(static_cast<size_t>(t * k));      // x: 8-bit blocks
  w.memory.emplace_back(static_cast<size_t>(nb * 4));     // x block scales
  w.memory.emplace_back(static_cast<size_t>(nb * 4));     // x block sums
  w.memory.emplace_back(static_cast<size_t>(t * m * 4));  // y
  w.memory.emplace_back(static_cast<size_t>(t * k * 4));  // x in f32
  w.memory.emplace_back(static_cast<size_t>(split_sum_bytes(nb)));
  std::mt19937_64 rng(3);
  for (size_t i = 0; i < w.memory[x].size(); ++i)
    w.memory[x].data()[i] = static_cast<uint8_t>(rng() % 255 - 127);
  auto* d = reinterpret_cast<float*>(w.memory[x + 1].data());
  for (int64_t b = 0; b < nb; ++b) d[b] = 0.01f;
  std::normal_distribution<float> dist(0, 1);
  auto* xf = reinterpret_cast<float*>(w.memory[x + 4].data());
  for (int64_t i = 0; i < t * k; ++i) xf[i] = dist(rng);
  args.insert(args.end(), {{"xq", LaunchArg(w.memory[x].data(), t * k, DType::i8)},
                           {"xd", LaunchArg(w.memory[x + 1].data(), nb, DType::f32)},
                           {"xs", LaunchArg(w.memory[x + 2].data(), nb, DType::i32)},
                           {"y", LaunchArg(w.memory[x + 3].data(), t * m, DType::f32)},
                           {"m", m},
                           {"k", k},
                           {"t", t}});
  w.args = std::move(args);
  w.quantize_args = {{"x", LaunchArg(w.memory[x + 4].data(), t * k, DType::f32)},
                     {"q", LaunchArg(w.memory[x].data(), t * k, DType::i8)},
                     {"d", LaunchArg(w.memory[x + 1].data(), nb, DType::f32)},
                     {"s", LaunchArg(w.memory[x + 2].data(), nb, DType::i32)},
                     {"s8", LaunchArg(w.memory[x + 5].data(), split_sum_bytes(nb), DType::i8)},
                     {"nblocks", nb}};
}

int64_t format_bytes(const Int4wRows& r) {
  return static_cast<int64_t>(r.q.size() + r.scales.size() * 2 + r.zeros.size());
}

Int4Workload row_major(const Int4wRows& r, int64_t t) {
  Int4Workload w{
      "gemv_int4w", {{"GROUP", r.group}, {"ZP", r.zeros.empty() ? 0 : 1}}, {}, {}, {}, 0};
  w.memory.push_back(copy_of(r.q.data(), r.q.size()));
  w.memory.push_back(copy_of(r.scales.data(), r.scales.size() * 2));
  // gemv_int4w's zeros buffer is unread without zero points.
  w.memory.push_back(r.zeros.empty() ? HostMemory(1) : copy_of(r.zeros.data(), r.zeros.size()));
  add_x_and_args(
      w,
      {{"q", LaunchArg(w.memory[0].data(), static_cast<int64_t>(r.q.size()), DType::u8)},
       {"scales", LaunchArg(w.memory[1].data(), static_cast<int64_t>(r.scales.size()), DType::f16)},
       {"zeros", LaunchArg(w.memory[2].data(), static_cast<int64_t>(r.zeros.size()), DType::u8)}},
      r.m, r.k, t);
  w.weight_bytes = format_bytes(r);
  return w;
}

Int4Workload interleaved(const Int4wRows& r, int64_t t) {
  Int4Workload w{
      "gemv_int4w_rows16", {{"GROUP", r.group}, {"ZP", r.zeros.empty() ? 0 : 1}}, {}, {}, {}, 0};
  std::vector<uint8_t> packed = interleave_int4w_rows16(r);
  w.memory.push_back(copy_of(packed.data(), packed.size()));
  add_x_and_args(
      w, {{"w", LaunchArg(w.memory[0].data(), static_cast<int64_t>(packed.size()), DType::u8)}},
      r.m, r.k, t);
  w.weight_bytes = format_bytes(r);
  return w;
}

Int4Workload awq(int64_t m, int64_t k) {
  AwqWeights a = random_awq(m, k);
  Int4Workload w{"gemv_awq", {{"GROUP", kGroup}}, {}, {}, {}, 0};
  w.memory.push_back(copy_of(a.qweight.data(), a.qweight.size() * 4));
  w.memory.push_back(copy_of(a.qzeros.data(), a.qzeros.size() * 4));
  w.memory.push_back(copy_of(a.scales.data(), a.scales.size() * 2));
  w.memory.emplace_back(static_cast<size_t>(k * 4));
  w.memory.emplace_back(static_cast<size_t>(m * 4));
  w.args = {
      {"qweight",
       LaunchArg(w.memory[0].data(), static_cast<int64_t>(a.qweight.size()), DType::i32)},
      {"qzeros", LaunchArg(w.memory[1].data(), static_cast<int64_t>(a.qzeros.size()), DType::i32)},
      {"scales", LaunchArg(w.memory[2].data(), static_cast<int64_t>(a.scales.size()), DType::f16)},
      {"x", LaunchArg(w.memory[3].data(), k, DType::f32)},
      {"y", LaunchArg(w.memory[4].data(), m, DType::f32)},
      {"k", k},
      {"n", m}};
  w.weight_bytes =
      static_cast<int64_t>(a.qweight.size() * 4 + a.qzeros.size() * 4 + a.scales.size() * 2);
  return w;
}
}  // namespace

const std::vector<std::string>& int4_formats() {
  static const std::vector<std::string> names = {"int4w", "int4w-rows16", "awq", "awq-int4w",
                                                 "awq-rows16"};
  return names;
}

Int4Workload int4_workload(const std::string& format, int64_t m, int64_t k, int64_t t) {
  if (format == "int4w") return row_major(random_int4w(m, k), t);
  if (format == "int4w-rows16") return interleaved(random_int4w(m, k), t);
  if (format == "awq") {
    if (t != 1)
      throw Error("int4_workload: awq runs gemv_awq, one token at a time (got " +
                  std::to_string(t) + "); awq-int4w and awq-rows16 take many");
    return awq(m, k);
  }
  if (format == "awq-int4w") return row_major(awq_to_int4w(random_awq(m, k)), t);
  if (format == "awq-rows16") return interleaved(awq_to_int4w(random_awq(m, k)), t);
  throw Error("int4_workload: unknown format '" + format + "'");
}

}  // namespace kiln
