// Checks that a kernel is well formed before anything executes or lowers it.
//
// Builders, the parser and every pass hand kernels to `verify`, so the
// interpreter and the code generators may assume well-typed input. Errors
// name the kernel, the op (by its text-form name and result) and the reason.
#pragma once

#include "ir/kernel.h"

namespace kiln {

// Throws kiln::Error on the first problem found.
void verify(const Kernel& k);

}  // namespace kiln
