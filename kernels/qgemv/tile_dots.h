// The arithmetic of the quantized GEMMs as tile dots: token_dots.h's
// sub-blocks (32 weights of BLOCK_M rows, decoded once) multiplied with
// BLOCK_T tokens' 8-bit activation blocks from quantize_q8 as one `dot`
// (mma.sync m16n8k32, u8 or s8 x s8 -> s32, on a GPU from sm_80), the exact
// integer sums then scaled in f32:
//   acc += scale * d_x * dot(q, x_q) - offset * d_x * sum(x_q).
// What TokenDots is to a CPU's vector dots, TileDots is to a GPU's tensor
// cores; a weight format only says how to decode its bytes into SubBlocks
// (block_decoder.h for ggml blocks, int4w_groups.h for int4w).
//
// Sub-blocks with a scale per 16 weights (lane scales: Q2_K, Q3_K, Q6_K,
// IQ2_XS, IQ2_S) dot with an x tile of 2 BLOCK_T columns, each token twice
// with one group's elements (the other's zeroed), so a group's sum meets
// its own scale. Codes with a constant offset c (SubBlock::lane_offset)
// enter the dot as signed bytes q - c.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ir/builder.h"
#include "kernels/qgemv/token_dots.h"
#include "kernels/registry.h"

namespace kiln {

// The default tile of a TileDots kernel for t tokens on a SIMT target:
// BLOCK_T the smallest multiple of 8 (an mma tile's tokens) that covers
// them, up to 32; BLOCK_M 64 rows, 32 for grouped experts, whose gather's
// row indices keep more registers live (64 rows of Q4_K at 16 tokens spill
// 4 bytes at sm_90; 32 rows take 126 registers). On a CPU (no CPU policy
// picks these kernels; they run there for tests and inspection) nothing:
// the spec keeps tile_dots_defaults' tile.
std::map<std::string, int64_t> tile_dots_shape(const Spec& s, const ScalarArgs& a);
// The tile without launch sizes: 64 x 32 on SIMT targets; 8 x 8 on a CPU,
// whose 16 or 32 vector registers hold 64 accumulators where a 64 x 32 tile
// leaves LLVM's register allocator minutes of work (AVX2).
std::map<std::string, int64_t> tile_dots_defaults(const Spec& s);

class TileDots {
 public:
  // `toks`: the [BT] x rows of the program's token slots (in range); `K`
  // the columns.
  TileDots(KernelBuilder& k, QuantizedActivations x, const Value& toks, const Value& K, int64_t bm,
           int64_t bt);

  // Accumulates sub-block sb for every token. Its code pieces are one of
  // 32, two halves of 16 (first 0 and 16), or the even and odd columns
  // (first 0 and 1, stride 2); offsets span the whole 32-element block.
  void add(const SubBlock& sb);

  // Stores the tile into y [t, m]: slots tok0 + i below t, rows below m.
  void store_tile(const Buffer& y, const Value& tok0, const Value& t, const Value& M,
                  const Value& rows) const;

 private:
  QuantizedActivations x_;
  int64_t bm_, bt_;
  Var acc_;
  Value x_at_, xblk_at_, x_at2_, group_mask_;
};

}  // namespace kiln
