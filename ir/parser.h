// Reads the text form written by print_kernel back into a verified Kernel.
//
// Errors give the line and column, what was expected and what was found.
#pragma once

#include <string_view>

#include "ir/kernel.h"

namespace kiln {

Kernel parse_kernel(std::string_view text);

}  // namespace kiln
