#include "models/tensor_codec.h"

#include <cstring>

#include "ir/dtype.h"
#include "kernels/quant/ggml_blocks.h"

namespace kiln {

void ggml_to_f32(TensorType t, const uint8_t* data, int64_t n, float* out) {
  switch (t) {
    case TensorType::f32: std::memcpy(out, data, static_cast<size_t>(n) * 4); return;
    case TensorType::f16:
    case TensorType::bf16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, data + 2 * i, 2);
        out[i] = t == TensorType::f16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
      }
      return;
    default: ggml::dequantize(t, data, n, out);
  }
}

void ggml_from_f32(TensorType t, const float* x, int64_t n, uint8_t* out) {
  switch (t) {
    case TensorType::f32: std::memcpy(out, x, static_cast<size_t>(n) * 4); return;
    case TensorType::f16:
    case TensorType::bf16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = t == TensorType::f16 ? f32_to_f16_bits(x[i]) : f32_to_bf16_bits(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    default: ggml::quantize(t, x, n, out);
  }
}

int64_t ggml_row_bytes(TensorType t, int64_t n) {
  const TensorTypeInfo& info = tensor_type_info(t);
  if (n < 0 || n % info.block_elems != 0) return -1;
  return n / info.block_elems * info.block_bytes;
}

}  // namespace kiln
