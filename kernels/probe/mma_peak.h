// What a caller of the mma_peak kernel (mma_peak.cpp) needs to turn its
// launch time into a rate: the multiply-adds one program performs.
#pragma once

#include <cstdint>

namespace kiln {

// Multiply-adds of one mma_peak program over `steps` loop steps (one
// TILE x TILE x TILE dot each).
int64_t mma_peak_macs(int64_t tile, int64_t steps);

}  // namespace kiln
