// Reductions along the last axis of a tile by repeated halving: each step
// combines the left and right halves of every row with one elementwise op,
// so the rows are reduced together. On the CPU a step pairs whole vector
// registers (or halves of one), where a per-row reduce would end in a
// horizontal reduction per row and a float max in a scalar chain (its NaN
// rule keeps LLVM from using a tree). The last axis must be a power of two.
#pragma once

#include "ir/builder.h"

namespace kiln {

enum class Fold { Sum, Max };

// [n] -> scalar, [rows, n] -> [rows].
Value fold_last_axis(Value x, Fold op);

}  // namespace kiln
