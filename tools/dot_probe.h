// The compute roofline every quantized GEMM benchmark is compared with: the
// int8_dot_peak kernel (kernels/probe/) run on every thread of a runtime,
// in GOP/s (2 per u8 x i8 multiply-add, the unit of a GEMM's GFLOP/s).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/runtime.h"

namespace kiln {

class DotProbe {
 public:
  explicit DotProbe(Runtime& rt);
  // One launch, one program per thread; returns a checksum of the sums.
  int64_t run_once();
  // Best GOP/s of `reps` launches.
  double measure_gops(int reps = 3);
  // Operations (2 per multiply-add) of one launch.
  double ops() const;

 private:
  Runtime& rt_;
  Spec spec_;
  int64_t programs_, steps_;
  std::vector<uint8_t> codes_;
  std::vector<int8_t> x_;
  std::vector<int32_t> y_;
};

}  // namespace kiln
