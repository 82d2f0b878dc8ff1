// What a caller of the int8_dot_peak kernel (int8_dot_peak.cpp) needs to
// turn its launch time into a rate: the byte-dot multiply-adds one program
// performs.
#pragma once

#include <cstdint>

namespace kiln {

// u8 x i8 multiply-adds of one int8_dot_peak program with ACC accumulators
// over `steps` loop steps.
int64_t int8_dot_peak_macs(int64_t acc, int64_t steps);

}  // namespace kiln
