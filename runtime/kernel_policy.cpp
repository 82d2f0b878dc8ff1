#include "runtime/kernel_policy.h"

#include "kernels/quant/rows16.h"

namespace kiln {

bool layout_fits(WeightLayout layout, const WeightCase& w) {
  if (layout == WeightLayout::as_stored) return true;
  if (w.m % 16 || w.k % 256) return false;
  if (w.quant == TensorType::i4) return w.group == 32 || w.group == 64 || w.group == 128;
  return w.quant && is_block_quantized(*w.quant) && ggml::has_rows16(*w.quant);
}

const char* matmul_kernel_name(MatmulKernel k) {
  switch (k) {
    case MatmulKernel::gemv: return "gemv";
    case MatmulKernel::gemm: return "gemm";
    case MatmulKernel::gemm_tiles: return "gemm_tiles";
    case MatmulKernel::qgemv: return "qgemv";
    case MatmulKernel::qgemv_rows16: return "qgemv_rows16";
    case MatmulKernel::qgemm_tiles: return "qgemm_tiles";
    case MatmulKernel::gemv_int4w: return "gemv_int4w";
    case MatmulKernel::gemv_int4w_rows16: return "gemv_int4w_rows16";
    case MatmulKernel::gemm_int4w_tiles: return "gemm_int4w_tiles";
    case MatmulKernel::gemv_w8a8: return "gemv_w8a8";
  }
  return "?";
}

MatmulKernel KernelPolicy::matmul(const WeightCase& w, WeightLayout layout, int64_t tokens,
                                  int64_t grouped_tile) const {
  const bool rows16 = layout == WeightLayout::rows16;
  if (w.quant == TensorType::i8_channel) return MatmulKernel::gemv_w8a8;
  if (w.quant == TensorType::i4)
    return rows16 ? MatmulKernel::gemv_int4w_rows16 : MatmulKernel::gemv_int4w;
  if (w.quant) return rows16 ? MatmulKernel::qgemv_rows16 : MatmulKernel::qgemv;
  return tokens == 1 && !grouped_tile ? MatmulKernel::gemv : MatmulKernel::gemm;
}

int64_t KernelPolicy::matmul_token_block(const WeightCase&, MatmulKernel, int64_t) const {
  return 0;
}

int64_t KernelPolicy::decode_split_keys(int64_t span) const { return span > 512 ? 512 : 0; }

AttentionBlocks KernelPolicy::attention_blocks(DType, int64_t) const {
  return AttentionBlocks::walk;
}

int64_t KernelPolicy::moe_tile(int64_t tokens, int64_t k, int64_t n_expert) const {
  const int64_t per_expert = tokens * k / n_expert;
  return per_expert >= 4 ? 4 : per_expert >= 2 ? 2 : 1;
}

}  // namespace kiln
