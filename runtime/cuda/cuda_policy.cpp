#include "runtime/cuda/cuda_policy.h"

#include <algorithm>

#include "kernels/quant/ggml_blocks.h"

namespace kiln {

namespace {

// The tokens of one int8 mma tile (m16n8k32's n).
constexpr int64_t kMmaTokens = 8;

class CudaPolicy : public KernelPolicy {
 public:
  explicit CudaPolicy(bool mma) : mma_(mma) {}
  std::string name() const override { return "cuda"; }

  WeightLayout weight_layout(const WeightCase&) const override { return WeightLayout::as_stored; }

  // Prompts of ggml blocks and int4w rows as tile dots (int8 mma.sync,
  // qgemm_tiles and gemm_int4w_tiles), and of f16 and bf16 matrices
  // (gemm_tiles): a tile of 8 tokens costs a GPU
  // what one token does, since the weights are read once either way;
  // grouped experts too when their tile is a whole number of mma tiles
  // (moe_tile). Decode keeps qgemv, gemv_int4w and gemv; FP8 and f32
  // matrices gemm, INT8 (w8a8) gemv_w8a8.
  MatmulKernel matmul(const WeightCase& w, WeightLayout layout, int64_t tokens,
                      int64_t grouped_tile) const override {
    const bool ggml_blocks = w.quant && is_block_quantized(*w.quant);
    const bool tiles = grouped_tile ? grouped_tile % kMmaTokens == 0 : tokens > 1;
    const bool half = !w.quant && !w.group && (w.dtype == DType::f16 || w.dtype == DType::bf16);
    if (mma_ && ggml_blocks && tiles) return MatmulKernel::qgemm_tiles;
    if (mma_ && w.quant == TensorType::i4 && tiles) return MatmulKernel::gemm_int4w_tiles;
    if (mma_ && half && tiles) return MatmulKernel::gemm_tiles;
    return KernelPolicy::matmul(w, layout, tokens, grouped_tile);
  }

  // MoE tiles of 8, 16 or 32 rows (one to four mma tiles) once the experts
  // average that many tokens each: a padded row costs tensor-core work
  // only, while each tile reads its expert's weights once. Fewer tokens
  // per expert take the default (up to 4, through qgemv).
  int64_t moe_tile(int64_t tokens, int64_t k, int64_t n_expert) const override {
    const int64_t per_expert = tokens * k / n_expert;
    if (!mma_ || per_expert < kMmaTokens) return KernelPolicy::moe_tile(tokens, k, n_expert);
    return per_expert >= 32 ? 32 : per_expert >= 16 ? 16 : kMmaTokens;
  }

  // Tokens per qgemv program for grouped experts (moe_sort bounds the MoE
  // tile by it): as many as ptxas keeps in registers without spilling at
  // sm_80 and sm_90 with 8 rows per program (the kernel's own 4, 8 for
  // Q4_K and Q5_K, were measured on CPUs): the formats whose sub-block
  // decode keeps most registers live take 2, Q4_K and Q5_K 4
  // (docs/kernel_policy.md).
  int64_t matmul_token_block(const WeightCase& w, MatmulKernel k, int64_t tokens) const override {
    if (k != MatmulKernel::qgemv || tokens < 4) return 0;
    using Q = TensorType;
    switch (w.quant.value_or(Q::f32)) {
      case Q::q2_K:
      case Q::q3_K:
      case Q::q6_K:
      case Q::iq4_xs: return 2;
      case Q::q4_K:
      case Q::q5_K: return 4;
      default: return 0;
    }
  }

  // Tensor cores for the f16, bf16 and q8_0 caches (int8 score dots), in
  // prompts and in decode; f32 and AURA caches keep the walk. At sm_90 the prompt's tile
  // dots are 29 KB of CUDA C without spills at head sizes 64 and 128, the
  // walk 720-890 KB with 4.8-8.6 KB of spills (docs/kernel_policy.md).
  // A GPU without mma.sync (before sm_80) keeps the walk's FMAs.
  AttentionBlocks attention_blocks(DType kv, int64_t) const override {
    const bool dots = kv == DType::f16 || kv == DType::bf16 || kv == DType::i8;
    return mma_ && dots ? AttentionBlocks::tiles : AttentionBlocks::walk;
  }

  // Decode always splits, as the tile strategy needs: a short cache too
  // spreads over more thread blocks than the KV heads give. Slices of 256
  // keys (64 KiB of f16 K and V at head size 128) until a GPU measures
  // its own.
  int64_t decode_split_keys(int64_t) const override { return 256; }

 private:
  bool mma_;
};

}  // namespace

int cuda_program_warps(const Kernel& k) {
  constexpr int64_t kPerThread = 16, kWarps = 4, kMaxWarps = 8;
  int64_t largest = 0;
  for (const Type& t : k.values) largest = std::max(largest, t.numel());
  for (const Type& t : k.vars) largest = std::max(largest, t.numel());
  return largest > kPerThread * 32 * kWarps ? kMaxWarps : kWarps;
}

const KernelPolicy& cuda_kernel_policy(int sm) {
  static const CudaPolicy with_mma(true), without(false);
  return sm >= kCudaMmaSm ? with_mma : without;
}

}  // namespace kiln
