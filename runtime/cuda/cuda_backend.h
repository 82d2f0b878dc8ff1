// The CUDA backend: kernels rendered to CUDA C (codegen/cuda), compiled to
// PTX by NVRTC through the compile cache, loaded and launched through the
// driver API. NVRTC and the driver are loaded at run time, so Kiln builds
// without them; making this backend on a machine without a GPU throws one
// line saying why. Buffers are device memory: the host reaches them only
// through upload() and download(), and a launch refuses any buffer this
// backend did not allocate.
#pragma once

#include <memory>

#include "runtime/backend.h"

namespace kiln {

std::unique_ptr<Backend> make_cuda_backend();

}  // namespace kiln
