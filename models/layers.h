// The building blocks decoder forwards share, as llama.cpp's
// build_norm/build_attn/build_ffn: one forward's graph with the model's
// weights, KV cache and inputs at hand, and the layers architectures are
// assembled from. An architecture (models/arch/) is a short function over
// these; what differs between architectures that share a block (biases,
// q/k norms, experts) is read from the ModelConfig, never from metadata.
#pragma once

#include <list>
#include <optional>
#include <string>
#include <vector>

#include "models/model_config.h"
#include "models/model_weights.h"
#include "runtime/ops.h"

namespace kiln {

// A forward's activation copied out by name (Forward::named), for
// comparing a run with another backend's, KV type's or llama.cpp's.
struct DumpedTensor {
  std::string name;  // llama.cpp's eval-callback name: "l_out-3", "result_norm"
  Shape shape;
  std::vector<float> data;
};

class Forward {
 public:
  Forward(Graph& g, const ModelConfig& c, ModelWeights& w, int64_t n_tokens, int64_t out_rows,
          int64_t n_ctx);

  Graph& g;
  const ModelConfig& c;
  ModelWeights& w;
  const int64_t n_tokens, out_rows;
  // Set by the model before an architecture builds on them.
  Tensor tokens, positions;        // i32 [n_tokens]
  std::vector<KvCache> cache;      // per layer
  std::vector<Tensor> rope_table;  // per layer, kernels/rope/rope.h's cos/sin table
  // Per MoE layer, i32 [n_expert]: each expert's routed (token, slot) pairs
  // are added in (kiln moe-stats); empty: not counted.
  std::vector<Tensor> expert_hits;
  // Per MoE layer of a pruned model that kept its full router, i32
  // [n_router]: the router's experts' new ids, -1 pruned; empty otherwise.
  std::vector<Tensor> expert_map;
  // A serving step's packed sequences (paged caches): attention per
  // sequence, and the logits of the rows out_ids lists (i32 [out_rows],
  // each sequence's last token) instead of the last out_rows.
  std::optional<ops::SeqBatch> batch;
  std::optional<Tensor> out_ids;
  // The output rows' final hidden states (after the final norm, before
  // the output projection) instead of their logits: embeddings.
  bool hidden = false;
  // Non-null: every tensor named() is also copied out here, in the order
  // the forward computes them (a list: the copies' memory stays put).
  std::list<DumpedTensor>* dump = nullptr;

  // v; with a dump, its copy under llama.cpp's name for the same tensor
  // ("<name>-<layer>", or `name` for layer -1), so that dumps of both
  // compare tensor by tensor (tools/diff_activations.py).
  Tensor named(const Tensor& v, const std::string& name, int64_t layer = -1);

  // "blk.<layer>.<name>"
  static std::string blk(int64_t layer, const std::string& name);

  // The token embeddings, times `scale`.
  Tensor embed(double scale = 1);
  // RMSNorm of x [rows, n] with the F32 weight `name`.
  Tensor norm(const Tensor& x, const std::string& name);
  Tensor add(const Tensor& x, const Tensor& y) { return ops::add(g, x, y); }
  // x W^T with the matrix `name` (the profile labels its matmuls `label`).
  Tensor linear(const std::string& name, const std::string& label, const Tensor& x);
  // Self-attention of layer l on h [t, n_embd]: q, k, v projections (with
  // their biases, q/k norms), RoPE, the cache append, causal SDPA, output
  // projection.
  Tensor attention(int64_t l, const Tensor& h);
  // The gated FFN of layer l: down(act(gate(h)) * up(h)).
  Tensor ffn(int64_t l, const Tensor& h, Activation act);
  // The MoE FFN of layer l: each token through its top-k experts (SwiGLU),
  // summed with the router's weights.
  Tensor moe(int64_t l, const Tensor& h);
  // The final norm and output projection (or the tied embedding) of the
  // last out_rows rows of x: the logits [out_rows, n_vocab]; with `hidden`
  // the normed rows [out_rows, n_embd].
  Tensor logits(const Tensor& x);

 private:
  // The plan slots a forward's replays set: the first token's position,
  // and the keys in the cache after it.
  Plan::Dynamic pos0() const;
  Plan::Dynamic kv_len() const;
  int64_t n_ctx_;
};

// The forward of an architecture (models/arch/): the logits of a Forward's tokens.
using ArchBuilder = Tensor (*)(Forward& f);

}  // namespace kiln
