#include "models/layers.h"

#include "ir/error.h"

namespace kiln {

Forward::Forward(Graph& graph, const ModelConfig& config, ModelWeights& weights, int64_t n,
                 int64_t out, int64_t n_ctx)
    : g(graph), c(config), w(weights), n_tokens(n), out_rows(out), n_ctx_(n_ctx) {}

std::string Forward::blk(int64_t layer, const std::string& name) {
  return "blk." + std::to_string(layer) + "." + name;
}

Tensor Forward::named(const Tensor& v, const std::string& name, int64_t layer) {
  if (!dump) return v;
  const std::string key = layer < 0 ? name : name + "-" + std::to_string(layer);
  if (v.dtype != DType::f32)
    throw Error("activation dump: " + key + " is " + v.str() + ", not f32");
  DumpedTensor& d = dump->emplace_back(DumpedTensor{key, v.shape, {}});
  d.data.assign(static_cast<size_t>(v.numel()), 0.0f);
  g.output("dump", v, d.data.data());
  return v;
}

Plan::Dynamic Forward::pos0() const { return {"pos0", n_ctx_ - n_tokens}; }
Plan::Dynamic Forward::kv_len() const { return {"kv_len", n_ctx_}; }

Tensor Forward::embed(double scale) {
  Graph::Scope s(g, "embed");
  return ops::get_rows(g, w.matrix(g, "token_embd.weight", "token_embd"), tokens, scale);
}

Tensor Forward::norm(const Tensor& x, const std::string& name) {
  return ops::rmsnorm(g, x, w.vector(g, name), c.rms_eps);
}

Tensor Forward::linear(const std::string& name, const std::string& label, const Tensor& x) {
  return ops::linear(g, w.matrix(g, name, label), x);
}

Tensor Forward::attention(int64_t l, const Tensor& h) {
  Graph::Scope s(g, "attn");
  const int64_t T = n_tokens, D = c.head_dim;
  Tensor q, k, v;
  if (c.fused_qkv) {  // q's rows, then k's, then v's
    const std::string qkv = blk(l, "attn_qkv.weight");
    const int64_t nq = c.n_head * D, nkv = c.n_head_kv * D;
    q = ops::linear(g, w.matrix_rows(g, qkv, "q", 0, nq), h);
    k = ops::linear(g, w.matrix_rows(g, qkv, "k", nq, nkv), h);
    v = ops::linear(g, w.matrix_rows(g, qkv, "v", nq + nkv, nkv), h);
  } else {
    q = linear(blk(l, "attn_q.weight"), "q", h);
    k = linear(blk(l, "attn_k.weight"), "k", h);
    v = linear(blk(l, "attn_v.weight"), "v", h);
  }
  if (c.qkv_bias) {
    q = ops::add_rows(g, q, w.vector(g, blk(l, "attn_q.bias")));
    k = ops::add_rows(g, k, w.vector(g, blk(l, "attn_k.bias")));
    v = ops::add_rows(g, v, w.vector(g, blk(l, "attn_v.bias")));
  }
  if (c.qk_norm) {  // over each head
    q = norm(q.reshape({T * c.n_head, D}), blk(l, "attn_q_norm.weight")).reshape({T, c.n_head * D});
    k = norm(k.reshape({T * c.n_head_kv, D}), blk(l, "attn_k_norm.weight"))
            .reshape({T, c.n_head_kv * D});
  }
  const Tensor& table = rope_table.at(static_cast<size_t>(l));
  q = named(ops::rope(g, q, table, positions, D, c.rope_neox), "Qcur", l);
  k = named(ops::rope(g, k, table, positions, D, c.rope_neox), "Kcur", l);
  KvCache& kv = cache.at(static_cast<size_t>(l));
  ops::AttentionMask mask{c.sliding(l) ? c.sliding_window : 0, {}};
  if (c.attn_sinks) mask.sinks = w.vector(g, blk(l, "attn_sinks.weight"));
  Tensor o;
  // One sequence runs the single-sequence kernels over its pages (split-K
  // decode at long contexts); several, the packed-batch ones.
  if (batch && batch->n_seqs > 1) {
    ops::kv_append(g, kv, k, v, positions, *batch);
    o = ops::attention(g, q, kv, c.attn_scale, *batch, mask);
  } else {
    ops::kv_append(g, kv, k, v, pos0());
    o = ops::attention(g, q, kv, c.attn_scale, kv_len(), pos0(), mask);
  }
  o = linear(blk(l, "attn_output.weight"), "output", o);
  if (c.out_bias) o = ops::add_rows(g, o, w.vector(g, blk(l, "attn_output.bias")));
  return named(o, "attn_out", l);
}

Tensor Forward::ffn(int64_t l, const Tensor& h, Activation act) {
  Graph::Scope s(g, "ffn");
  Tensor gate, up;
  if (c.fused_gate_up) {  // the gate's rows, then the up projection's
    const std::string fused = blk(l, "ffn_up.weight");
    gate = ops::linear(g, w.matrix_rows(g, fused, "gate", 0, c.n_ff), h);
    up = ops::linear(g, w.matrix_rows(g, fused, "up", c.n_ff, c.n_ff), h);
  } else {
    gate = linear(blk(l, "ffn_gate.weight"), "gate", h);
    up = linear(blk(l, "ffn_up.weight"), "up", h);
  }
  return named(linear(blk(l, "ffn_down.weight"), "down", ops::glu(g, gate, up, act)), "ffn_out", l);
}

Tensor Forward::moe(int64_t l, const Tensor& h) {
  Graph::Scope s(g, "moe");
  Tensor logits = linear(blk(l, "ffn_gate_inp.weight"), "router", h);
  if (c.expert_bias) logits = ops::add_rows(g, logits, w.vector(g, blk(l, "ffn_gate_inp.bias")));
  ops::RouterOptions ro{c.norm_topk, {}, c.expert_renorm};
  if (!expert_map.empty()) ro.expert_map = expert_map.at(static_cast<size_t>(l));
  ops::Routing r = ops::moe_route(g, logits, c.n_expert_used, ro);
  const Weight gate = w.experts(g, blk(l, "ffn_gate_exps.weight"), "gate"),
               up = w.experts(g, blk(l, "ffn_up_exps.weight"), "up"),
               down = w.experts(g, blk(l, "ffn_down_exps.weight"), "down");
  ops::ExpertRows rows = ops::moe_sort(g, r, c.n_expert, {&gate, &up, &down});
  if (!expert_hits.empty()) ops::accumulate(g, expert_hits.at(static_cast<size_t>(l)), rows.counts);
  auto experts = [&](const Weight& stack, const std::string& name, const Tensor& x, Grouping mode) {
    Tensor y = ops::grouped_linear(g, stack, x, rows, mode);
    if (!c.expert_bias) return y;
    return ops::add_expert_rows(g, y, w.expert_biases(g, blk(l, name + ".bias")), rows);
  };
  Tensor a = ops::glu(g, experts(gate, "ffn_gate_exps", h, Grouping::gather),
                      experts(up, "ffn_up_exps", h, Grouping::gather),
                      c.expert_bias ? Activation::swiglu_oai : Activation::silu);
  return named(ops::moe_combine(g, experts(down, "ffn_down_exps", a, Grouping::sorted), r, rows),
               "ffn_moe_out", l);
}

Tensor Forward::logits(const Tensor& x) {
  Graph::Scope s(g, "output");
  Tensor last =
      named(norm(out_ids ? ops::get_rows(g, x, *out_ids) : x.rows(n_tokens - out_rows, out_rows),
                 "output_norm.weight"),
            "result_norm");
  if (hidden) return last;
  return named(
      linear(w.has("output.weight") ? "output.weight" : "token_embd.weight", "lm_head", last),
      "result_output");
}

}  // namespace kiln
