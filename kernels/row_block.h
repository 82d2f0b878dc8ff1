// The row-block split shared by GEMV-like kernels.
//
// A program owns BLOCK_M consecutive rows. Every program but the last owns
// only rows below m, so it can load whole rows unmasked (plain vector
// loads); the last one masks its rows. `split_row_block` emits both paths
// behind one runtime test; `store_rows` writes a per-row result with the
// row mask only on the masked path.
#pragma once

#include <cstdint>
#include <functional>

#include "ir/builder.h"

namespace kiln {

void split_row_block(KernelBuilder& k, const Value& row0, int64_t block_m, const Value& m,
                     const std::function<void(bool masked)>& pass);

void store_rows(const Pointer& p, const Value& v, const Value& rows, const Value& m, bool masked);

}  // namespace kiln
