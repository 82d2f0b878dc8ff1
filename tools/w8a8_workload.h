// The INT8 checkpoints' GEMV for `kiln bench --formats w8a8`: int8 weights
// [m, k] with a scale per row and one token's per-token int8 activations
// (gemv_w8a8), in the shape of the int4 problems (int4_workload.h).
#pragma once

#include <cstdint>

#include "tools/int4_workload.h"

namespace kiln {

Int4Workload w8a8_workload(int64_t m, int64_t k);

}  // namespace kiln
