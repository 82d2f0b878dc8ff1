// A GEMV problem with generated data, shared by `kiln run` and `kiln bench`:
// storage in the kernel's dtypes, launch arguments, bytes moved, and the
// error against a double-precision reference.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/interpreter.h"
#include "ir/spec.h"
#include "runtime/host_memory.h"

namespace kiln {

class GemvWorkload {
 public:
  GemvWorkload(int64_t m, int64_t k, DType w, DType x, uint64_t seed = 1);

  std::vector<Arg> args();
  int64_t bytes() const;  // W + x + y, the memory one launch must move
  // max |y - y_ref| / max |y_ref| with y_ref in double from the stored W, x.
  double relative_error() const;

 private:
  int64_t m_, k_;
  DType wt_, xt_;
  HostMemory w_, x_, y_;
};

}  // namespace kiln
