// The stable text form of a kernel, and its structural hash.
//
// The text form is what `kiln inspect --ir` shows, what golden tests compare
// and what the compile-cache key hashes; `parse_kernel` reads it back
// exactly (print(parse(print(k))) == print(k)). Values are renumbered in
// definition order when printed, so two kernels built the same way print
// the same, whatever ids their builders used.
#pragma once

#include <cstdint>
#include <string>

#include "ir/kernel.h"

namespace kiln {

std::string print_kernel(const Kernel& k);

// 64-bit hash of the canonical text form (FNV-1a): equal for structurally
// identical kernels, different when any op, type, attribute or constexpr
// differs.
uint64_t structural_hash(const Kernel& k);

}  // namespace kiln
