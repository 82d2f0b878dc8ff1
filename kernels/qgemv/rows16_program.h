// The program every GEMV/GEMM over 16-row interleaved weights shares
// (qgemv_rows16 for ggml's formats, gemv_int4w_rows16 for int4w).
//
// In these layouts one 64-byte load holds 4 consecutive codes of each of
// 16 rows, so an i32 lane is a row: a sub-block's groups of 4 sum in the
// lane's accumulator (vpdpbusd with the token's 4 x bytes as a broadcast
// operand) and the f32 scaling is paid once per sub-block and 16 rows. What
// differs between formats is only how one 256-weight chunk of 16 rows is
// decoded; the frame around it (buffers, program grid, token block, chunk
// loop, stores) is built once here, so a format is one chunk function.
//
// Buffers w (u8), xq (i8), xd (f32), xs (i32), [xs8 (i8),] y (f32);
// scalars m, k, t. Program (token block, 16-row group); x from quantize_q8.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "kernels/registry.h"

namespace kiln {

inline constexpr int64_t kRows16 = 16;  // rows per interleaved group, one per i32 lane

// What a format's chunk code sees: the tokens' x, the chunk's bytes.
struct Rows16Context {
  Buffer w, xq, xd, xs;
  std::optional<Buffer> xs8;       // with Rows16Format::split_sums
  std::vector<Value> xbyte, xblk;  // each token's first x byte and x block, i64
  Value c, b64;                    // the chunk's first byte, the chunk index (i64)
  Value ahead;                     // the first byte of the chunk 4 KiB ahead (i64)
  int64_t chunk_bytes = 0;

  Value bytes(const Value& off, int64_t n) const;
  // 4 bytes per row from off ([16, 4] u8): the codes or group bytes of one
  // 64-byte line, a dot4 operand.
  Value lanes4(const Value& off) const;
  Value at(int64_t off) const;
  // 16 little-endian f16 at off, as f32 [16].
  Value f16s(const Value& off) const;
  // Token i's 4 x codes at `first` of the chunk, broadcast to every row ([16, 4] i32).
  Value x4(size_t i, const Value& first) const;
  // Token i's sum of the 32 x codes of the chunk's 32-weight block j
  // (quantize_q8's s), broadcast to [16] i32.
  Value block_sum(size_t i, const Value& j) const;
  // Token i's chunk block sums as bytes (quantize_q8's s8), 4 at a time
  // broadcast to every row ([16, 4] i8): part 0 and 1 the low bytes of
  // blocks 0-3 and 4-7, part 2 and 3 their high bytes.
  Value split_sums4(size_t i, int64_t part) const;
  // Token i's split sums of the chunk's 16-code groups 4 quad .. 4 quad + 3,
  // their low or high bytes, broadcast to every row ([16, 4] i8).
  Value split_sums16_4(size_t i, int64_t quad, bool high) const;
  // Token i's sum of the chunk's 256 x codes (quantize_q8's s8 with Q8_K
  // blocks), broadcast to every row ([16] i32).
  Value chunk_sum(size_t i) const;
  // Token i's sum of the 32 x codes of the chunk's 32-block j times -128
  // (quantize_q8's s8), broadcast to [16] i32: the start of a byte dot whose
  // codes are stored + 128.
  Value block_sum_neg128(size_t i, const Value& j) const;
  // Prefetches part `part` (a runtime loop index) of `parts` of the chunk
  // 4 KiB ahead. Every format's chunk code calls it once per iteration of
  // its loop over the chunk, so the chunk's lines are requested as the work
  // goes: in one burst before the chunk, the core's miss queue held the
  // loads behind them back.
  void prefetch_ahead(const Value& part, int64_t parts) const;
};

// u8 codes [16, 4] times 4 x codes [16, 4], summed per row: one vpdpbusd.
Value dot4(const Value& codes, const Value& x);

// A row's 4 bytes [16, 4] u8 as one u32 lane [16], and back. Bit planes are
// moved in u32 lanes (x86 has no byte shifts): a shift and a mask that drops
// the bits crossing into a neighbouring byte.
Value u32_lanes(const Value& bytes4);
Value u8_lanes(const Value& words);

// The 4-bit codes of 64 weights (pair p of a chunk) laid out as
// u8 [8 groups][16 rows][4] at `codes + 512 p`, where byte i of group g of a
// row holds weight 64 p + 4 g + i in its low nibble and 64 p + 32 + 4 g + i
// in its high one (rows16.h's Q4_K codes, int4w_rows16.h's): for each token,
// the dots of the low and high halves with its x, i32 [16]. With `high`
// >= 0, the codes are Q5_K's 5-bit ones (rows16.h: lo in bits 0-4, hi's top
// 3 bits above, its low 2 in the u8 [8][16][4] at `high`), and the high
// half's dots come times hi_times (exact in f32: a sub-block's dot < 2^24).
struct NibblePairDots {
  std::vector<Value> lo, hi;
  int hi_times = 1;
};
NibblePairDots nibble_pair_dots(const Rows16Context& x, const Value& p64, int64_t codes,
                                size_t tokens, int64_t high = -1);

// How one format adds a 256-weight chunk of 16 rows to each token's [16]
// f32 accumulator in `acc`. With `superblock_scaled`, the terms are in
// units of the token's Q8_K scale (x quantised in blocks of 256, its scale
// repeated in xd's 8 slots): the frame starts acc at zero per chunk and
// adds acc * xd to the output; otherwise acc is the output itself.
struct Rows16Format {
  int64_t chunk_bytes = 0;
  bool superblock_scaled = false;
  bool split_sums = false;  // the kernel takes xs8
  std::function<void(KernelBuilder&, const Rows16Context&, std::vector<Var>& acc)> chunk;
};

// Emits the whole program: BLOCK_T tokens per program (axis 0), a 16-row
// group per program (axis 1), k / 256 chunks; grouped by expert when the
// spec says so (kernels/moe/expert_tiles.h).
void build_rows16_program(KernelBuilder& k, const Spec& s, int64_t block_t, const Rows16Format& f);

// The launch of such a kernel: checks m % 16, k % 256 and t >= 1 (errors
// name `kernel`) and sizes the buffers, w being `w_bytes`.
LaunchShape rows16_launch(const std::string& kernel, int64_t block_t, int64_t m, int64_t k,
                          int64_t t, int64_t w_bytes, bool split_sums);

// BLOCK_T for t tokens: `most` (the most tokens whose accumulators fit the
// registers with the decoded codes) once t reaches it, else the largest of
// 8, 4, 2 and 1 below it that t fills.
inline std::map<std::string, int64_t> rows16_block_t(int64_t t, int64_t most) {
  for (int64_t b : {most, int64_t{8}, int64_t{4}, int64_t{2}})
    if (b <= most && t >= b) return {{"BLOCK_T", b}};
  return {{"BLOCK_T", 1}};
}

}  // namespace kiln
