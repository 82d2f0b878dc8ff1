// The cuda-sim backend: the CUDA backend's code (codegen/cuda's CUDA C for
// sm_80) run on the CPU simulator (targets/cuda/cuda_simulator.h), so whole
// model forwards take the CUDA path on machines without a GPU, with every
// global access bounds-checked. Blocks run one after another on the calling
// thread; it is a correctness tool, not a fast one. Buffers are host memory.
#pragma once

#include <memory>

#include "runtime/backend.h"

namespace kiln {

std::unique_ptr<Backend> make_cuda_sim_backend();

}  // namespace kiln
