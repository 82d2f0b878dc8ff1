// Which kernel, weight layout and attention variant an op runs: a choice
// each backend makes for its machine, asked by the ops (runtime/ops.cpp) and
// the weight loader (models/packed_weights.cpp).
//
// Kernels are written once; how they are best used is not the same on a
// 2-core AVX-512 host and on a GPU. The CPU wants quantized weights
// interleaved across 16 rows so a 32-bit lane is a row; a GPU reads ggml's
// rows as they are, without a second copy in device memory. Shared code
// therefore never branches on a backend: it describes the case (a weight's
// format and shape, the tokens of a step, the keys a decode may walk) and
// runs what the backend's policy answers. A backend adds a folder and a
// policy; ops only learn each kernel's operands.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ir/dtype.h"
#include "kernels/quant/tensor_type.h"

namespace kiln {

// How the loader keeps a quantized matrix in backend memory.
enum class WeightLayout {
  as_stored,  // the file's rows of blocks, used in place
  rows16,     // interleaved across 16 rows (kernels/quant/rows16.h, int4w.h's Int4wRows16)
};

// A weight matrix as the policy sees it: its format and shape.
struct WeightCase {
  std::optional<TensorType> quant;  // as Weight::quant; none for float matrices
  int64_t m = 0, k = 0;
  int64_t experts = 0;       // a stack of this many [m, k] matrices; 0: one
  int64_t group = 0;         // int4 weight-only: the scale group; FP8: the scale block
  DType dtype = DType::f32;  // a float matrix's element type (quantized: u8)
};

// Whether `layout` can hold w: rows16 needs a format with a 16-row interleave,
// m a multiple of 16 and k of 256 (int4w also a group of 32, 64 or 128).
bool layout_fits(WeightLayout layout, const WeightCase& w);

// The kernels a matmul y = x W^T can run (their operands: runtime/ops.cpp).
enum class MatmulKernel {
  gemv,               // float weights, one token
  gemm,               // float weights, a token tile at a time
  gemm_tiles,         // f16/bf16 weights, tile dots (mma.sync on a GPU)
  qgemv,              // ggml blocks as stored
  qgemv_rows16,       // ggml blocks interleaved across 16 rows
  qgemm_tiles,        // ggml blocks as stored, tile dots (mma.sync on a GPU)
  gemv_int4w,         // int4 weight-only rows
  gemv_int4w_rows16,  // int4 weight-only, interleaved across 16 rows
  gemm_int4w_tiles,   // int4 weight-only rows, tile dots (mma.sync on a GPU)
  gemv_w8a8,          // int8 weights, int8 activations per token
};
const char* matmul_kernel_name(MatmulKernel k);  // the registry's name

// The block strategy attention runs over a cache: how a program's query
// rows meet a block of keys.
enum class AttentionBlocks {
  walk,   // vector FMAs, keys in the lanes (kernels/attention/kv_walk.h):
          // attention_decode, attention_decode_split, attention_prefill
  tiles,  // tile dots, mma.sync on a GPU (kernels/attention/tile_blocks.h):
          // attention_decode_tiles (split-K decode), attention_prefill_tiles
};

class KernelPolicy {
 public:
  virtual ~KernelPolicy() = default;

  virtual std::string name() const = 0;  // "cpu", "cuda"

  // The layout the loader gives w; must fit w (layout_fits).
  virtual WeightLayout weight_layout(const WeightCase& w) const = 0;
  // The kernel for x [tokens, k] times w held in `layout`; `grouped_tile`
  // > 0: a stack of experts in one launch, that many rows per program (the
  // MoE tile, ExpertRows::tile), `tokens` the layer's. Must read that
  // layout. By default the one kernel family that reads it, gemv or gemm
  // for floats by tokens.
  virtual MatmulKernel matmul(const WeightCase& w, WeightLayout layout, int64_t tokens,
                              int64_t grouped_tile) const;
  // Tokens per program of matmul `k` of w for a step of `tokens` tokens,
  // or 0 for the kernel's own choice (its shape heuristic or tuning). A
  // grouped matmul's tokens per program are the MoE tile, which moe_sort
  // bounds by this. By default 0.
  virtual int64_t matmul_token_block(const WeightCase& w, MatmulKernel k, int64_t tokens) const;
  // Keys per slice when a decode step over a cache it may walk `span` keys
  // of splits the keys across programs (flash-decoding:
  // attention_decode_split or _tiles, then attention_decode_merge); 0 runs
  // one program per KV head (attention_decode), which the tile strategy
  // does not have, so a policy that answers tiles for decode must split. By default slices of 512
  // keys once the cache can hold more: on a CPU 256 KiB of f16 K and V at head size 128, in L2 for
  // the next program of its group; on a GPU one KV head's cache spread over several thread blocks
  // (docs/kernel_policy.md).
  virtual int64_t decode_split_keys(int64_t span) const;
  // The block strategy of attention over a cache of dtype `kv` (f16, bf16,
  // f32, i8 for q8_0, u32 for AURA) for `tokens` query tokens of a sequence
  // (1: decode). By default the walk, which every cache type has.
  virtual AttentionBlocks attention_blocks(DType kv, int64_t tokens) const;
  // Rows per tile of the grouped MoE matmuls for `tokens` tokens choosing k
  // of n_expert experts (kernels/moe/expert_tiles.h). By default about the
  // tokens each expert gets, up to 4 (the token block the quantized GEMMs
  // reach most of their speed at), so that decode (one token per expert)
  // pads nothing.
  virtual int64_t moe_tile(int64_t tokens, int64_t k, int64_t n_expert) const;
};

}  // namespace kiln
