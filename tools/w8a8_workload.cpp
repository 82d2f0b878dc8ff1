#include "tools/w8a8_workload.h"

#include <random>

namespace kiln {

Int4Workload w8a8_workload(int64_t m, int64_t k) {
  Int4Workload w{"gemv_w8a8", {}, {}, {}, {}, m * k + m * 4};
  std::mt19937_64 rng(5);
  auto bytes = [&](size_t n) {
    HostMemory h(n);
    for (size_t i = 0; i < n; ++i) h.data()[i] = static_cast<uint8_t>(rng());
    return h;
  };
  w.memory.push_back(bytes(static_cast<size_t>(m * k)));  // w
  HostMemory ws(static_cast<size_t>(m * 4)), xd(4), xs(4);
  for (int64_t i = 0; i < m; ++i) reinterpret_cast<float*>(ws.data())[i] = 0.01f;
  *reinterpret_cast<float*>(xd.data()) = 0.02f;
  *reinterpret_cast<int32_t*>(xs.data()) = 0;
  w.memory.push_back(std::move(ws));
  w.memory.push_back(bytes(static_cast<size_t>(k)));  // xq
  w.memory.push_back(std::move(xd));
  w.memory.push_back(std::move(xs));
  w.memory.emplace_back(static_cast<size_t>(m * 4));  // y
  w.args = {{"w", LaunchArg(w.memory[0].data(), m * k, DType::u8)},
            {"ws", LaunchArg(w.memory[1].data(), m, DType::f32)},
            {"xq", LaunchArg(w.memory[2].data(), k, DType::i8)},
            {"xd", LaunchArg(w.memory[3].data(), 1, DType::f32)},
            {"xs", LaunchArg(w.memory[4].data(), 1, DType::i32)},
            {"y", LaunchArg(w.memory[5].data(), m, DType::f32)},
            {"m", m},
            {"k", k},
            {"t", int64_t{1}}};
  return w;
}

}  // namespace kiln
