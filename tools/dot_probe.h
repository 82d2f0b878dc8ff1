// The compute roofline every prompt GEMM benchmark is compared with: the
// dot_peak kernel (kernels/probe/) for one operand type (u8 byte dots for
// the quantized GEMMs, f32 FMAs for gemm) run on every thread of a runtime,
// in GOP/s (2 per multiply-add, the unit of a GEMM's GFLOP/s).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/runtime.h"

namespace kiln {

class DotProbe {
 public:
  DotProbe(Runtime& rt, DType t);
  // One launch, one program per thread; returns a checksum of the sums.
  double run_once();
  // Best GOP/s of `reps` launches.
  double measure_gops(int reps = 3);
  // Operations (2 per multiply-add) of one launch.
  double ops() const;

 private:
  Runtime& rt_;
  DType t_;
  Spec spec_;
  int64_t programs_, steps_;
  // Raw storage for codes (t_), x (i8 or f32) and y (i32 or f32).
  std::vector<uint8_t> codes_, x_, y_;
  BoundArgs args_;  // over codes_, x_, y_
  int64_t codes_n_ = 0, x_n_ = 0, y_n_ = 0;
};

}  // namespace kiln
