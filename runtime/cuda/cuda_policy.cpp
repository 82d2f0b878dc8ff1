#include "runtime/cuda/cuda_policy.h"

namespace kiln {

namespace {

class CudaPolicy : public KernelPolicy {
 public:
  std::string name() const override { return "cuda"; }

  WeightLayout weight_layout(const WeightCase&) const override { return WeightLayout::as_stored; }

  // Tensor cores for the f16 and bf16 caches; q8_0, f32 and AURA caches
  // keep the walk. At sm_90 the tile dots are 29 KB of CUDA C without
  // spills at head sizes 64 and 128, the walk 720-890 KB with 4.8-8.6 KB of
  // spills (docs/kernel_policy.md).
  PrefillAttention prefill_attention(DType kv) const override {
    return kv == DType::f16 || kv == DType::bf16 ? PrefillAttention::tiles : PrefillAttention::walk;
  }
};

}  // namespace

const KernelPolicy& cuda_kernel_policy() {
  static const CudaPolicy policy;
  return policy;
}

}  // namespace kiln
