#include "runtime/cpu/cpu_policy.h"

namespace kiln {

namespace {

class CpuPolicy : public KernelPolicy {
 public:
  std::string name() const override { return "cpu"; }

  // One copy serves decode and prefill alike: the interleave is made once,
  // at load, and the file's pages are released after.
  WeightLayout weight_layout(const WeightCase& w) const override {
    return layout_fits(WeightLayout::rows16, w) ? WeightLayout::rows16 : WeightLayout::as_stored;
  }

  // Slices of 512 keys: 256 KiB of f16 K and V at head size 128, in L2 for
  // the next program of its group (docs/kernel_policy.md has the sweep).
  // A smaller cache is walked by one program per KV head.
  int64_t decode_split_keys(int64_t span) const override { return span > 512 ? 512 : 0; }
};

}  // namespace

const KernelPolicy& cpu_kernel_policy() {
  static const CpuPolicy policy;
  return policy;
}

}  // namespace kiln
