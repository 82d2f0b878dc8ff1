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
};

}  // namespace

const KernelPolicy& cpu_kernel_policy() {
  static const CpuPolicy policy;
  return policy;
}

}  // namespace kiln
