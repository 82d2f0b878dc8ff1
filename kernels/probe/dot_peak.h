// What a caller of the dot_peak kernel (dot_peak.cpp) needs to turn its
// launch time into a rate: the multiply-adds one program performs.
#pragma once

#include <cstdint>

#include "ir/dtype.h"

namespace kiln {

// Multiply-adds of one dot_peak program with operand type t (u8: byte dots,
// f32: FMAs) and ACC accumulators over `steps` loop steps.
int64_t dot_peak_macs(DType t, int64_t acc, int64_t steps);

}  // namespace kiln
