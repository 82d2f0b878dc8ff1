// The row-block split shared by GEMV-like kernels.
//
// A program owns BLOCK_M consecutive rows. Every program but the last owns
// only rows below m, so on a CPU it can load whole rows unmasked (plain
// vector loads, where masked ones are slower and keep LLVM from widening
// them); the last one masks its rows. `split_row_block` emits both paths
// behind one runtime test. On a SIMT target (warp_size > 1) each thread
// predicates its own loads, so a masked load costs what a plain one does
// and the unmasked copy would only double the code NVRTC compiles: there it
// emits the masked path alone. `store_rows` writes a per-row result with
// the row mask only on the masked path.
#pragma once

#include <cstdint>
#include <functional>

#include "ir/builder.h"
#include "ir/spec.h"

namespace kiln {

void split_row_block(KernelBuilder& k, const TargetDesc& target, const Value& row0, int64_t block_m,
                     const Value& m, const std::function<void(bool masked)>& pass);

void store_rows(const Pointer& p, const Value& v, const Value& rows, const Value& m, bool masked);

}  // namespace kiln
