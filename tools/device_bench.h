// `kiln bench --device cuda`: the kernel families a model's GPU forward runs,
// each against the device's own roofline measured in the same run by the
// library's probe kernels (kernels/probe/): read_peak for the streaming
// kernels (decode GEMVs, decode attention: GB/s of the bytes they must
// read) and mma_peak for those bound by tile dots (prompt attention:
// GFLOP/s). A fraction of a roofline taken on the same device minutes
// apart says how far a schedule is from the machine, which absolute
// figures from another GPU cannot. --device cuda-sim runs the same launches
// at small sizes on the CPU simulator: a dry run of the suite, not a speed.
#pragma once

#include <string>

namespace kiln {

// Prints one row per kernel; returns the process exit status.
int run_device_bench(const std::string& device, int repeats);

}  // namespace kiln
