// Random inputs for kiln bench's workloads: n values uniform in [-1, 1],
// rounded to dtype t and stored in its layout. One definition keeps every
// workload's data drawn the same way (a benchmark's speed can depend on it,
// e.g. through denormals or the exponent range of f16).
#pragma once

#include <cstdint>
#include <random>

#include "ir/dtype.h"
#include "runtime/host_memory.h"

namespace kiln {

HostMemory random_buffer(int64_t n, DType t, std::mt19937_64& rng);

}  // namespace kiln
