// The CPU's kernel policy (runtime/kernel_policy.h): block-quantized and
// int4 weights interleaved across 16 rows wherever the shape allows, so a
// 32-bit lane of a VNNI register is a row and one 64-byte load feeds 16 rows'
// dots. Every other choice is KernelPolicy's default.
#pragma once

#include "runtime/kernel_policy.h"

namespace kiln {

const KernelPolicy& cpu_kernel_policy();

}  // namespace kiln
