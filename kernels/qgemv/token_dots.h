// The arithmetic every quantized GEMV/GEMM in this family shares: weights
// decoded into 32-weight sub-blocks of unsigned codes with per-row scales,
// multiplied with each token's 8-bit activation block (from quantize_q8)
// as unsigned x signed byte products summed in groups of 4 (VNNI vpdpbusd
// on the CPU), then scaled in f32. A weight format only says how to decode
// its bytes into SubBlocks; TokenDots does the rest for BLOCK_T tokens, so
// decode's GEMV (one token) and prompt GEMM (many) are the same kernel.
//
// Every format reduces to
//   sum_j w_j x_j = d_x (sum_lanes scale * dot(q, x_q) - offset * sum(x_q))
// with q the stored unsigned code, d_x the activation block's scale.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/builder.h"
#include "kernels/registry.h"

namespace kiln {

// One 32-weight sub-block of BLOCK_M rows, decoded once for all tokens.
struct SubBlock {
  // Unsigned codes [BM, n] (n = 16 or 32, all pieces alike) and the x
  // elements they multiply: first, first + stride, ... within the block.
  struct Piece {
    Value codes;
    int64_t first, stride = 1;
  };
  std::vector<Piece> pieces;
  Value scale;  // per row [BM,1] or per lane [BM, n/4]
  // offset * sum(x_q) terms: per-row coefficient [BM,1] over x elements
  // first .. first+n-1 of the block (n = 32 uses quantize_q8's sum).
  struct Offset {
    Value coef;
    int64_t first, n;
    // The term takes d_x * sum(x_q) rounded to f16, as llama.cpp's Q8_1
    // activations (paired with Q4_1 and Q5_1) store it, instead of exact.
    bool f16_sum = false;
  };
  std::vector<Offset> offsets;
  Value xblock;  // index of the token's 32-element x block (scalar)
  // The scale already includes the activation block's d_x (single-token
  // decoders that scale a whole block's sub-blocks in one vector op).
  bool scale_has_dx = false;
  // A constant c subtracted from every code (Q6_K's 32), applied in the
  // integer lanes as c * (sum of the lane's 4 x values): exact, and cheaper
  // than f32 offset terms. One stride-1 piece only.
  int64_t lane_offset = 0;
  // Per-lane f32 offsets [BM, n/4] (Q2_K's mins of 16-weight groups):
  // lane_min * (sum of the lane's 4 x values) is subtracted before d_x
  // scales the lane, the x sums being one byte dot with ones per token. One
  // stride-1 piece only.
  Value lane_min = Value();
};

// The activation blocks of a call: q i8 [t, k], d f32 [t, k/32], s i32 [t, k/32].
struct QuantizedActivations {
  Buffer q, d, s;
};

// The launch of a kernel built on TokenDots over m rows, k columns and t
// tokens: token blocks on grid axis 0 (fastest, so a row block's weights
// stay in cache), row blocks on axis 1, and the sizes of the activation and
// output buffers (xq, xd, xs, y); the caller adds its weights'. Throws
// naming `kernel` when t < 1.
LaunchShape token_launch(const std::string& kernel, const Spec& s, int64_t m, int64_t k, int64_t t);

// The BLOCK_T token indices of a program whose first token is tok0:
// tokens past t (the last token block) repeat the last token, so every x
// load stays unmasked; store_tokens skips them.
std::vector<Value> token_indices(const Value& tok0, int64_t block_t, const Value& t);

class TokenDots {
 public:
  // `toks`: the token indices of this program (clamped into range);
  // `blocks_per_token`: k / 32; `lanes`: n/4 of the pieces.
  // `offset_lanes` > 0 makes room for subtract() terms of [BM, offset_lanes].
  TokenDots(KernelBuilder& k, QuantizedActivations x, std::vector<Value> toks,
            Value blocks_per_token, int64_t bm, int64_t lanes, int64_t offset_lanes = 0);

  // Accumulates sub-block sb for every token.
  void add(const SubBlock& sb);
  // Subtracts a single-token decoder's own offset terms, [BM,
  // offset_lanes] summed over the lanes at the end.
  void subtract(const Value& terms);
  // Token i's row results [BM].
  Value result(size_t i) const;
  // Stores every real token's results into y [t, m] (row-masked when
  // `masked`).
  void store_tokens(const Buffer& y, const Value& tok0, const Value& t, const Value& m,
                    const Value& rows, bool masked) const;

 private:
  Value x_bytes(const Value& xblk, const SubBlock::Piece& p, int64_t n) const;

  KernelBuilder& k_;
  QuantizedActivations x_;
  std::vector<Value> toks_;
  std::vector<Value> tok_base_;  // toks_[i] * kb_, i64
  Value kb_;
  int64_t bm_, lanes_;
  std::vector<Var> acc_, accm_;
  std::vector<Var> extra_;  // one when offset_lanes > 0
};

}  // namespace kiln
