// Which x row each token slot of a matmul program reads and which y row it
// writes: plain, or grouped by expert for MoE.
//
// A grouped matmul runs every active expert of a layer in one launch. Its
// rows are moe_sort's padded positions: each expert's (token, slot) pairs
// are contiguous and padded to a multiple of the tile, so that one program
// (a tile of positions) multiplies by one expert's weights, decoded once for
// all its tokens, exactly as the plain kernel decodes a weight block for its
// token block. So the plain kernels take the grouped mode as a Spec
// constexpr, GROUPED, instead of being copied:
//   0  plain: slots tile * p .. of x [t, k] to y [t, m]; slots past t
//      repeat the last token and are not stored.
//   1  gather: x is the layer's input [tokens, k]; slot p reads row
//      sorted[p] (the first slot's token for padding), writes y row p.
//   2  sorted: x is an earlier grouped matmul's output [t, k], in position
//      order; slot p reads and writes row p.
// Grouped, t is moe_sort's row bound (a multiple of the tile), w holds
// n_expert matrices w_stride elements apart, and a program reads its tile's
// expert's through Buffer::at; a tile past the last expert's (tile_expert
// -1) does nothing, so experts no token chose cost nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "kernels/moe/grouping.h"
#include "kernels/registry.h"

namespace kiln {

// The GROUPED constexpr of a spec (plain for kernels without one).
Grouping grouping(const Spec& s);

class ExpertTiles {
 public:
  // Declares the grouped mode's buffers (tile_expert i32, and sorted i32
  // for gather) and scalars (n_expert, w_stride, and tokens for gather);
  // `tile` slots per program, `t` the kernel's row count. Plain, with
  // `row_block_bytes` (i32, the weight bytes of one row block), programs
  // run in bands of row blocks (row_block).
  ExpertTiles(KernelBuilder& k, const Spec& s, int64_t tile, const Value& t,
              const Value& row_block_bytes = {});

  // The program's block of output rows (weight rows). Plain, token tiles
  // are axis 0 and row blocks axis 1, so on the CPU (axis 0 fastest) a row
  // block's weights stay in cache while every token tile passes over them.
  // With row_block_bytes, the linear program order is banded: each token
  // tile passes over a band of row blocks (about 512 KiB of weights, at
  // most 16 blocks) in turn, then the next tile, so the band's weights and
  // the tile's x both stay in L2, where unbanded every token's x streams
  // from L3 once per row block (IQ4_XS, 4096x14336, 512 tokens: 7.3 MB of
  // x per row block). kiln bench, 2 threads, median tokens/s of 5-8
  // alternated rounds, unbanded -> bands of 8 row blocks 3.65k -> 4.09k,
  // -> bands of 4 3.64k -> 4.38k; a third series (bands of 4), in twice
  // the noise, 4.18k -> 3.88k.
  // Against llama.cpp (compare_llamacpp.py): 1.00 / 1.02 / 1.18 / 1.25
  // unbanded, 1.10 / 1.21 / 1.30 / 1.61 banded, alternated.
  // Grouped, the axes swap: an expert's tiles are few (one in a decode) and
  // its matrix small, and walking its row blocks in address order lets
  // each program's prefetches run into the next one's weights (Qwen3-30B-
  // A3B-shaped experts, Q4_K/Q6_K, 2 threads: moe.down 0.30 -> 0.22 ms,
  // gate and up 0.19 -> 0.17 ms per decode step).
  Value row_block() const;

  bool grouped() const { return mode_ != Grouping::plain; }
  // The program's first slot (i32).
  const Value& first() const { return first_; }
  // The x row of position `pos` (i32) of this program's tile.
  Value x_row(const Value& pos) const;
  // The x rows of the tile's `n` slots, in range: one scalar each, or as
  // one [n] vector (for tile dots).
  std::vector<Value> x_rows(int64_t n) const;
  Value x_row_tile(int64_t n) const;
  // The weights of the program's expert: w itself when plain.
  Buffer weights(const Buffer& w) const;
  // The program's expert's part of a per-expert buffer other than w (block
  // scales), `stride` (i64) elements apart: b itself when plain.
  Buffer of_expert(const Buffer& b, const Value& stride) const;
  // Emits body, only for tiles of an expert when grouped.
  void run(const std::function<void()>& body) const;

 private:
  KernelBuilder& k_;
  Grouping mode_;
  Value t_, first_, row_, expert_, n_expert_, w_stride_;
  std::optional<Buffer> tile_expert_, sorted_;
};

// The launch of a grouped kernel, from the plain kernel's `plain` (whose
// axis-0 count the caller computed with `tile` slots per program): checks t
// against the tile, sizes tile_expert and sorted, w as n_expert x w_stride
// (at least the plain `w_elems`), and in gather mode the x buffers to
// `tokens` rows (`x_per_row`: each x buffer's elements per row), and swaps
// grid axes 0 and 1 (row_block). Errors name `kernel`. A plain spec's
// launch is returned unchanged.
LaunchShape expert_tiles_launch(const std::string& kernel, const Spec& s, const ScalarArgs& a,
                                LaunchShape plain, int64_t tile, const std::string& w,
                                const std::map<std::string, int64_t>& x_per_row);

}  // namespace kiln
