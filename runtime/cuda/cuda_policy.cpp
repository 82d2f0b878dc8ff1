#include "runtime/cuda/cuda_policy.h"

namespace kiln {

namespace {

class CudaPolicy : public KernelPolicy {
 public:
  std::string name() const override { return "cuda"; }

  WeightLayout weight_layout(const WeightCase&) const override { return WeightLayout::as_stored; }

  // Flash-decoding: slices of 512 keys spread one KV head's cache over
  // several thread blocks, where one block per KV head would leave most
  // SMs idle.
  int64_t decode_split_keys(int64_t span) const override { return span > 512 ? 512 : 0; }
};

}  // namespace

const KernelPolicy& cuda_kernel_policy() {
  static const CudaPolicy policy;
  return policy;
}

}  // namespace kiln
