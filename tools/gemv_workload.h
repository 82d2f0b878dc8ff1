// A GEMV problem with generated data, shared by `kiln run` and `kiln bench`:
// storage in the kernel's dtypes, launch arguments, bytes moved, and the
// error against a double-precision reference. With scale_block > 0, W has
// block scales as gemv's SCALE_BLOCK reads them (FP8 checkpoints).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/spec.h"
#include "runtime/host_memory.h"
#include "runtime/named_args.h"

namespace kiln {

class GemvWorkload {
 public:
  GemvWorkload(int64_t m, int64_t k, DType w, DType x, uint64_t seed = 1, int64_t scale_block = 0);

  LaunchArgs args();      // gemv's, by parameter name
  LaunchArgs weights();   // w, and ws with block scales: what gemm shares with gemv
  int64_t bytes() const;  // W (with its scales) + x + y, the memory one launch must move
  // max |y - y_ref| / max |y_ref| with y_ref in double from the stored W, x.
  double relative_error() const;

 private:
  int64_t scales() const;                   // block scales, 0 without
  float scale(int64_t i, int64_t j) const;  // of W[i, j]: 1 without

  int64_t m_, k_, block_;
  DType wt_, xt_;
  HostMemory w_, x_, y_, ws_;
};

}  // namespace kiln
