// The ops model forwards are written in: library kernels as functions of
// graph tensors (runtime/graph.h).
//
// Each op checks that its tensors fit together (errors name the op, the
// tensors and their shapes), derives the kernel's dtypes, constexprs and
// sizes from them, allocates its result and adds the launch to the graph;
// the runtime's tuning database (or the kernel's heuristic) picks the
// tunable constexprs when the graph is recorded.
#pragma once

#include <optional>
#include <string>

#include "kernels/moe/grouping.h"
#include "runtime/graph.h"
#include "runtime/kernel_policy.h"

namespace kiln {

// A weight matrix [m, k] in backend memory: a float tensor [m, k], or the
// bytes of ggml blocks (kernels/quant/ggml_blocks.h) with their type.
struct Weight {
  std::string label;  // of its matmuls in a profile ("attn_q")
  Tensor data;
  int64_t m = 0, k = 0;
  // The format of a quantized matrix (a ggml block format, i4 or
  // i8_channel); none for float matrices, data's dtype says which.
  std::optional<TensorType> quant;
  // The same blocks interleaved across 16 rows (kernels/quant/rows16.h),
  // when the loader made that copy: linear then runs qgemv_rows16 on it.
  std::optional<Tensor> rows16;
  int64_t experts = 0;  // a stack of this many [m, k] matrices (an MoE layer's); 0: one
  // Checkpoint formats ggml has no type for, with their scales:
  // - FP8 (data f8e4m3 [m, k]): scales f32 [cdiv(m, B), cdiv(k, B)],
  //   w[i, j] = data[i, j] * scales[i / B, j / B], B = scale_block;
  // - int4 weight-only (quant i4, data u8 [m, k/2] in
  //   kernels/quant/int4w.h's rows): scales f16 and zeros u8 [m, k / B],
  //   B = scale_block the group size; rows16 its 16-row interleave;
  // - INT8 (quant i8_channel, data u8 [m, k] holding int8 codes): scales f32
  //   [m], one per row; activations are quantised per token to int8.
  std::optional<Tensor> scales{}, zeros{};
  int64_t scale_block = 0;

  // What a kernel policy sees of it, and the layout it is held in.
  WeightCase policy_case() const { return {quant, m, k, experts, scale_block, data.dtype}; }
  WeightLayout layout() const { return rows16 ? WeightLayout::rows16 : WeightLayout::as_stored; }
};

// The KV cache of one layer, in kernels/attention/kv_cache.h's layout: one
// sequence's max_ctx rows, or with page > 0 a pool of n_pages pages of
// which `table` (i32 [ceil(max_ctx / page)]) lists the sequence's.
struct KvCache {
  Tensor k, v;
  int64_t max_ctx = 0, n_kv_heads = 0, head_dim = 0;
  int64_t page = 0, n_pages = 0;
  std::optional<Tensor> table{};
  // f16: a q8_0 cache's scales (k and v i8), an AURA cache's norms (u32).
  std::optional<Tensor> k_scale{}, v_scale{};
  // An AURA cache's (kernels/aura/aura_format.h): the bits of its K and V
  // codes and the layer's rotations, f32 [D, D]: the K and V forward
  // matrices and the V inverse.
  int kbits = 0, vbits = 0;
  std::optional<Tensor> k_rot{}, v_rot{}, v_unrot{};
};

// The glu kernel's ACT: SwiGLU, GeGLU, GPT-OSS's clamped SwiGLU.
enum class Activation { silu, gelu_tanh, swiglu_oai };

namespace ops {

// x + y, of one dtype and element count.
Tensor add(Graph& g, const Tensor& x, const Tensor& y);
// acc += x in place (a running count or sum kept across replays).
Tensor accumulate(Graph& g, const Tensor& acc, const Tensor& x);
// x with the row vector b [n] added to each of its rows [.., n] (in place).
Tensor add_rows(Graph& g, const Tensor& x, const Tensor& b);
// rmsnorm(x) * w over the last axis; w [n].
Tensor rmsnorm(Graph& g, const Tensor& x, const Tensor& w, double eps);
// softmax over the last axis.
Tensor softmax(Graph& g, const Tensor& x);
// act(gate) * up, elementwise.
Tensor glu(Graph& g, const Tensor& gate, const Tensor& up, Activation act);
// x [t, k] W^T -> f32 [t, m]. Block-quantized weights quantise x first;
// consumers of the same x share that.
Tensor linear(Graph& g, const Weight& w, const Tensor& x);
// f32 [rows, n]: table[ids[i]] * scale for a float table [r, n] or the
// ggml blocks of a Weight.
Tensor get_rows(Graph& g, const Tensor& table, const Tensor& ids, double scale = 1);
Tensor get_rows(Graph& g, const Weight& table, const Tensor& ids, double scale = 1);
// RoPE on x [t, heads * head_dim] (in place) at positions [t] from a
// cos/sin table [n_pos, rot] (kernels/rope/rope.h).
Tensor rope(Graph& g, const Tensor& x, const Tensor& cos_sin, const Tensor& positions,
            int64_t head_dim, bool neox);

// Appends keys and values [t, n_kv_heads * head_dim] at positions pos0..
// (into an AURA cache: encoded, kernels/aura/aura_encode.cpp).
Tensor kv_append(Graph& g, KvCache& cache, const Tensor& k, const Tensor& v,
                 const Plan::Dynamic& pos0);
// What a layer's attention adds to the causal mask: a sliding window of
// `window` keys (0: none) and per-head sink logits f32 [n_heads]
// (kernels/attention/attention_window.h, attention_sinks.h).
struct AttentionMask {
  int64_t window = 0;
  std::optional<Tensor> sinks;
};
// Causal attention of q [t, n_heads * head_dim] at positions pos0.. over the
// cache's first kv_len entries; decode (t = 1) or prefill kernels. Over an
// AURA cache q is rotated into the cache's space first and the output
// rotated back (kernels/aura/).
Tensor attention(Graph& g, const Tensor& q, const KvCache& cache, double scale,
                 const Plan::Dynamic& kv_len, const Plan::Dynamic& pos0,
                 const AttentionMask& mask = {});

// A serving step's packed batch (varlen): n_seqs sequences' new tokens back
// to back, each sequence's rows in its own pages of a paged cache's pool.
// The tensors are i32 inputs the step uploads before each replay.
struct SeqBatch {
  int64_t n_seqs = 0;
  Tensor cu_seqlens;  // [n_seqs + 1]: sequence s's tokens are rows cu[s] .. cu[s+1] - 1
  Tensor seq_pos0;    // [n_seqs]: the position of each sequence's first new token
  Tensor seq_len;     // [n_seqs]: the rows each sequence holds after the step
  Tensor tok_seq;     // [n_tokens]: each token's sequence
  Tensor tables;      // [n_seqs, ceil(max_ctx / page)]: each sequence's pages
};
// Appends a packed batch's keys and values, token t at row positions[t] of
// its sequence's pages.
Tensor kv_append(Graph& g, KvCache& cache, const Tensor& k, const Tensor& v,
                 const Tensor& positions, const SeqBatch& batch);
// Causal attention of each sequence's new tokens over its own rows:
// attention_decode_batch when every sequence brings one token (decode),
// else attention_prefill_varlen (chunked prefill mixed with decodes).
Tensor attention(Graph& g, const Tensor& q, const KvCache& cache, double scale,
                 const SeqBatch& batch, const AttentionMask& mask = {});

// MoE, grouped (kernels/moe/): the router's choice per token, the pairs
// sorted by expert, one launch per matmul for all experts, and the combine.
// Nothing returns to the host: an expert no token chose costs nothing.
//
// Each token's top-k experts by softmaxed router logits [t, n_router]
// and their weights (normalised over the chosen with norm_topk). With an
// expert_map (i32 [n_router]: a pruned model's old -> new ids, -1 pruned), a
// chosen expert the model no longer holds is dropped (id -1, weight 0) and,
// with renorm, the others' weights renormalised.
struct Routing {
  Tensor ids;      // i32 [t, k]
  Tensor weights;  // f32 [t, k]
};
struct RouterOptions {
  bool norm_topk = false;
  std::optional<Tensor> expert_map{};
  bool renorm = false;
};
Routing moe_route(Graph& g, const Tensor& logits, int64_t k, const RouterOptions& o);
// The (token, slot) pairs sorted by expert into tiles (kernels/moe/moe_sort.cpp).
struct ExpertRows {
  Tensor counts, offsets;  // i32 [n_expert]
  Tensor sorted;           // i32 [rows]: the token of each row, -1 padding
  Tensor pos;              // i32 [tokens, k]: the row of each pair
  Tensor tile_expert;      // i32 [rows / tile]
  int64_t tokens = 0, k = 0, n_expert = 0, tile = 1;
  int64_t rows = 0;  // the bound the grouped matmuls are sized for
};
// The tile is the policy's moe_tile, no larger than the token block the
// policy allows the grouped matmul of each stack in `experts` (the stacks
// the tiles will run through; a grouped matmul's tokens per program are
// its tile).
ExpertRows moe_sort(Graph& g, const Routing& r, int64_t n_expert,
                    const std::vector<const Weight*>& experts = {});
// y [rows, m] = each row times its expert's matrix, for a stack of experts
// (Weight::experts): x is the layer's input [tokens, k] (gather) or an
// earlier grouped output [rows, k] (sorted).
Tensor grouped_linear(Graph& g, const Weight& experts, const Tensor& x, const ExpertRows& rows,
                      Grouping mode);
// y [rows, n] (a grouped matmul's output) plus each row's expert's bias,
// b [n_expert, n], in place.
Tensor add_expert_rows(Graph& g, const Tensor& y, const Tensor& b, const ExpertRows& rows);
// [tokens, n]: each token's weighted sum of its experts' rows of y, in slot
// order; added onto `onto` in place when given.
Tensor moe_combine(Graph& g, const Tensor& y, const Routing& r, const ExpertRows& rows,
                   const std::optional<Tensor>& onto = {});

}  // namespace ops
}  // namespace kiln
