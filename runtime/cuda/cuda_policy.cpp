#include "runtime/cuda/cuda_policy.h"

#include <algorithm>

#include "kernels/quant/ggml_blocks.h"

namespace kiln {

namespace {

class CudaPolicy : public KernelPolicy {
 public:
  explicit CudaPolicy(bool mma) : mma_(mma) {}
  std::string name() const override { return "cuda"; }

  WeightLayout weight_layout(const WeightCase&) const override { return WeightLayout::as_stored; }

  // Prompts of ggml blocks as tile dots (int8 mma.sync, qgemm_tiles) from
  // one mma tile's 8 tokens; decode and shorter prompts keep qgemv's vector
  // dots, and so do grouped experts, whose tiles are moe_tile's few tokens.
  MatmulKernel matmul(const WeightCase& w, WeightLayout layout, int64_t tokens,
                      bool grouped) const override {
    const bool ggml_blocks = w.quant && w.quant != kInt4w && w.quant != kW8a8;
    if (mma_ && ggml_blocks && !grouped && tokens >= 8) return MatmulKernel::qgemm_tiles;
    return KernelPolicy::matmul(w, layout, tokens, grouped);
  }

  // Prompt tokens per qgemv program: as many as ptxas keeps in registers
  // without spilling at sm_80 and sm_90 with 8 rows per program (the
  // kernel's own 4, 8 for Q4_K and Q5_K, were measured on CPUs): the
  // formats whose sub-block decode keeps most registers live take 2, Q4_K
  // and Q5_K 4 (docs/kernel_policy.md).
  int64_t matmul_token_block(const WeightCase& w, MatmulKernel k, int64_t tokens) const override {
    if (k != MatmulKernel::qgemv || tokens < 4) return 0;
    using Q = ggml::QuantType;
    switch (static_cast<Q>(w.quant)) {
      case Q::Q2_K:
      case Q::Q3_K:
      case Q::Q6_K:
      case Q::IQ4_XS: return 2;
      case Q::Q4_K:
      case Q::Q5_K: return 4;
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
