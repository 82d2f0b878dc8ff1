// How a program decodes ggml weight blocks into 32-weight sub-blocks of
// unsigned codes with scales and offsets (token_dots.h's SubBlock), written
// once per format and read by every kernel that multiplies ggml blocks as
// stored: qgemv's vector dots (TokenDots) and qgemm_tiles' tile dots.
//
// Per format, the scale and offset of a sub-block's reduction:
// - Q4_0 (w = (q - 8) d): scale d, offset 8 d.
// - Q4_1 and Q5_1 (w = q d + m): scale d, offset -m, against d_x * sum(x_q)
//   rounded to f16 as llama.cpp's Q8_1 activations hold it.
// - Q5_0 (w = (q - 16) d, q's 5th bit from a u32 of bits): scale d, offset 16 d.
// - Q8_0 (w = q d, q signed): bytes flipped to q ^ 0x80 = q + 128; scale d,
//   offset 128 d.
// - Q4_K and Q5_K (w = d sc q - dmin m per 32-weight sub-block, 6-bit sc
//   and m; Q5_K's 5th bits from qh): scale d sc, offset dmin m.
// - Q2_K (w = d sc q - dmin m per 16 weights, 4-bit sc and m): each lane
//   takes its 16-weight group's scale and min (SubBlock::lane_min).
// - Q3_K and Q6_K (w = d sc (q - c), signed 6- or 8-bit sc per 16
//   weights, c = 4 or 32): each lane takes its group's scale; c is
//   SubBlock::lane_offset.
// - IQ4_NL, IQ4_XS and MXFP4 (w = d table[q], a signed 16-entry codebook):
//   each nibble looked up in the table + 128 (a byte shuffle on SIMD
//   CPUs), so codes are unsigned as Q8_0's; scale d (IQ4_XS: d (ls - 32)
//   per 32 weights; MXFP4: 2^(e - 128)), offset 128 d.
// - The lattice formats IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S (w = db
//   (+-mag), mag a byte of a grid point): each point looked up whole as 8
//   (IQ2) or 4 (IQ3) bytes, the sign bits spread to byte masks by a lookup,
//   codes 128 +- mag; scale db per 32 weights (IQ2_XS, IQ2_S: per 16, lane
//   scales), lane_offset 128.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "ir/builder.h"
#include "kernels/qgemv/token_dots.h"
#include "kernels/quant/ggml_blocks.h"
#include "kernels/registry.h"

namespace kiln {

// Formats with a scale per 16-weight group: Q2_K, Q3_K, Q6_K.
bool group_scales(TensorType fmt);
// Formats of 32-weight blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4).
bool small_blocks(TensorType fmt);
// Formats with Q4_K's 12-byte 6-bit scales and mins per 32 weights.
bool scale_min_k(TensorType fmt);
// How much of a block one BlockDecoder::decode() returns: the shapes of
// code that suit how many tokens share the decoded weights and how they are
// multiplied.
enum class DecodeSteps {
  // A whole block per loop iteration, unrolled, with 32-byte code pieces:
  // the fewest instructions per weight byte, for decode's GEMV
  // (bandwidth-bound). Q4_K and Q5_K need OneTokenDots for it.
  block,
  // Steps small enough that the codes and every token's accumulators stay
  // in registers (Q4_K: 64 weights, Q6_K: 128), with 16-byte code pieces
  // where a format packs nibbles, which halves the f32 work per token:
  // prompt GEMM with vector dots.
  shared,
  // One 32-weight sub-block a step: one tile dot each (qgemm_tiles), and
  // the least code per loop body for a GPU compiler.
  sub_blocks,
};

// Bytes of a sub-block's code pieces (16 or 32) for `fmt` decoded in
// `steps`: whole 32-byte pieces where the codes are bytes, except in shared
// steps.
int64_t code_piece_bytes(TensorType fmt, DecodeSteps steps);
// The f16 held in each row's two little-endian bytes ([.., 2] u8), as f32.
Value f16_value(const Value& two_bytes);
// Q4_0 and Q8_0 as unsigned codes: w = (code - offset) d, Q8_0's signed
// bytes flipped by ^ 128.
int64_t code_offset(TensorType fmt);

// The decode of one single-token GEMV program that scales a whole Q4_K or
// Q5_K block's sub-blocks by the activation scales at once: the token's
// activations, its first x block and the dots that take the min terms.
struct OneTokenDots {
  QuantizedActivations x;
  Value xbase;
  TokenDots* dots = nullptr;
};

// The operands of a GEMM over ggml blocks as stored (qgemv, qgemm_tiles),
// declared in their order: w u8, xq, xd, xs (quantize_q8's), y f32, m, k,
// t; with the format's block geometry (FMT; throws for a format Kiln does
// not read) and the blocks per row.
struct GgmlGemm {
  Buffer w;
  QuantizedActivations x;
  Buffer y;
  Value M, K, T;
  const TensorTypeInfo& f;
  Value nb;
};
GgmlGemm declare_ggml_gemm(KernelBuilder& k, const Spec& s);

// Its launch over m rows, k columns and t tokens (BLOCK_M rows and BLOCK_T
// tokens a program, or expert tiles); errors name `kernel`.
LaunchShape ggml_gemm_launch(const std::string& kernel, const Spec& s, const ScalarArgs& a);

class BlockDecoder {
 public:
  // `ld` loads the bytes of BM rows of `w` (masked or not).
  BlockDecoder(TensorType fmt, int64_t bm, DecodeSteps steps, Buffer w,
               std::function<Value(const Pointer&)> ld, const OneTokenDots* one = nullptr);

  int64_t steps_per_block() const;
  int64_t piece_bytes() const { return code_piece_bytes(FMT, steps); }

  // The sub-blocks of step `step` (ignored unless stepped) of the block at
  // byte offsets `blk` [BM,1], whose x blocks start at `xb0`.
  std::vector<SubBlock> decode(const Value& blk, const Value& step, const Value& xb0);

  const TensorType FMT;
  const int64_t BM;
  const DecodeSteps steps;

 private:
  bool stepped() const { return steps != DecodeSteps::block; }

  Value bytes(const Value& off, int64_t n);
  Value f16_at(const Value& off);
  std::vector<SubBlock::Piece> pieces(const Value& off, const std::function<Value(Value)>& f);
  SubBlock q4_0(const Value& blk, const Value& xb);
  SubBlock q4_1(const Value& blk, const Value& xb);
  SubBlock q5(const Value& blk, const Value& xb, bool with_min);
  SubBlock lookup_nibbles(const Value& qs_at, const Value& d, const Value& xb);
  std::vector<SubBlock> iq4_xs(const Value& blk, const Value& xb0);
  SubBlock lattice_sub(const Value& blk, const Value& s, const Value& xb);
  SubBlock q8_0(const Value& blk, const Value& xb);
  std::vector<SubBlock::Piece> k_codes(const Value& blk, const Value& chunk_off, int64_t half,
                                       const Value& j);
  SubBlock k_sub(const Value& blk, const Value& d, const Value& dmin, const Value& j,
                 const std::function<std::vector<SubBlock::Piece>()>& codes, const Value& xb0);
  SubBlock iq4_xs_sub(const Value& blk, const Value& s, const Value& xb0);
  Value lanes(const Value& pair);
  SubBlock q6_k_sub(const Value& blk, const Value& j, const Value& xb0);
  SubBlock q3_k_sub(const Value& blk, const Value& j, const Value& xb0);
  SubBlock q2_k_sub(const Value& blk, const Value& j, const Value& xb0);
  std::vector<SubBlock> k_block(const Value& blk, const Value& xb0);
  std::vector<SubBlock> k_step(const Value& blk, const Value& c, const Value& xb0);
  Value lane_pair(const Value& groups, int64_t s);
  std::vector<SubBlock> half(const Value& blk, const Value& h, const Value& xb0);
  std::vector<SubBlock> q6_k(const Value& blk, const Value& h, const Value& xb0);
  std::vector<SubBlock> q3_k(const Value& blk, const Value& h, const Value& xb0);
  std::vector<SubBlock> q2_k(const Value& blk, const Value& h, const Value& xb0);

  Buffer w_;
  std::function<Value(const Pointer&)> ld_;
  std::optional<OneTokenDots> one_;
};

}  // namespace kiln
