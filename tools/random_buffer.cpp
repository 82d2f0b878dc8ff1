#include "tools/random_buffer.h"

#include "ir/scalar_eval.h"

namespace kiln {

HostMemory random_buffer(int64_t n, DType t, std::mt19937_64& rng) {
  HostMemory buf(static_cast<size_t>(n * dtype_bytes(t)));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    ScalarValue v;
    v.f = round_to_float_dtype(dist(rng), t);
    store_element(buf.data(), i, t, v);
  }
  return buf;
}

}  // namespace kiln
