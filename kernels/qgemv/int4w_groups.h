// What every kernel over int4 weight-only matrices (int4w) shares: its
// operands, its launch, and the decode of a program's rows into 32-weight
// sub-blocks (token_dots.h's SubBlock) group by group, so that the vector
// dots of gemv_int4w and the tile dots of gemm_int4w_tiles read one
// description of the layout.
//
// Layout (Kiln's own, as GPTQ-style weight-only formats store it): q u8
// [m, k/2], two 4-bit values per byte, column 2j in the low nibble and 2j+1
// in the high one; scales f16 [m, k/GROUP] (GROUP = 32, 64, 128, or 0 for
// one scale per row); with ZP=1, zero points u8 [m, k/GROUP] (0..15),
// otherwise the zero point is 8. w = (q - z) * s: a sub-block's scale is s,
// its offset s z. GROUPED runs a layer's experts in one launch
// (kernels/moe/expert_tiles.h): q, scales and zeros each hold n_expert
// matrices, q w_stride bytes apart and the scales and zero points m * k /
// GROUP apart.
#pragma once

#include <functional>
#include <string>

#include "ir/builder.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/qgemv/token_dots.h"
#include "kernels/registry.h"

namespace kiln {

struct Int4wOperands {
  Buffer q, scales, zeros;
  QuantizedActivations x;
  Buffer y;
  Value M, K, T;
  bool zp = false;
  Value group, ngroups;  // columns per group (GROUP, or k for 0) and groups per row
};

// Declares the operands in their order (q, scales, zeros, xq, xd, xs, y,
// m, k, t); throws naming `kernel` for a GROUP other than 32, 64, 128, 0.
Int4wOperands declare_int4w(KernelBuilder& k, const Spec& s, const std::string& kernel);

// The program's matrix: the tile's expert's when grouped.
struct Int4wMatrix {
  Buffer q, scales, zeros;
};
Int4wMatrix int4w_matrix(const Int4wOperands& o, const ExpertTiles& tiles);

// Where rows [BM] start in q and in the scales and zero points ([BM, 1]).
struct Int4wRows {
  Value q_at, group_at;
};
Int4wRows int4w_rows(const Int4wOperands& o, const Value& rows);

// Emits a loop over the groups of the rows and, within each, its 32-weight
// sub-blocks in order, calling `add` with each; `ld` loads (masked or not).
void int4w_sub_blocks(KernelBuilder& k, const Int4wOperands& o, const Int4wMatrix& w,
                      const Int4wRows& r, int64_t bm,
                      const std::function<Value(const Pointer&)>& ld,
                      const std::function<void(const SubBlock&)>& add);

// The launch over m rows, k columns and t tokens with BLOCK_M rows and
// BLOCK_T tokens per program (grouped: expert tiles); errors name `kernel`.
LaunchShape int4w_launch(const std::string& kernel, const Spec& s, const ScalarArgs& a);

}  // namespace kiln
