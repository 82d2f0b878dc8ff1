#include "models/llm.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ir/dtype.h"
#include "ir/error.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/quant/ggml_blocks.h"
#include "kernels/quant/rows16.h"
#include "kernels/quant/split_sums.h"
#include "kernels/rope/rope.h"
#include "models/matmul.h"

namespace kiln {

namespace {

void* mut(const void* p) { return const_cast<void*>(p); }  // kernels only read inputs

// Row r of a [rows, n] tensor of any type Kiln reads, as f32.
void dequantize_row(const GgufTensor& t, int64_t r, float* out) {
  int64_t n = t.shape[0];
  const uint8_t* row = t.data + r * ggml_row_bytes(t.type, n);
  switch (t.type) {
    case GgmlType::f32: std::copy_n(reinterpret_cast<const float*>(row), n, out); break;
    case GgmlType::f16:
      for (int64_t i = 0; i < n; ++i)
        out[i] = f16_bits_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
      break;
    case GgmlType::bf16:
      for (int64_t i = 0; i < n; ++i)
        out[i] = bf16_bits_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
      break;
    default: ggml::dequantize(static_cast<ggml::QuantType>(t.type), row, n, out);
  }
}

WeightView weight(const GgufTensor& t, const PackedWeights& packed) {
  if (t.shape.size() != 2) throw Error("tensor '" + t.name + "' is not a matrix");
  return {t.data, t.type, t.shape[0], t.shape[1], packed.rows16(t)};
}

// Expert e of a 3-D expert tensor (ne = [k, m, n_expert]).
WeightView expert(const GgufTensor& t, int64_t e, const PackedWeights& packed) {
  int64_t k = t.shape[0], m = t.shape[1];
  const uint8_t* rows16 = packed.rows16(t);
  return {t.data + e * m * ggml_row_bytes(t.type, k), t.type, k, m,
          rows16 ? rows16 + e * ggml::rows16_bytes(static_cast<ggml::QuantType>(t.type), m, k)
                 : nullptr};
}

}  // namespace

// The plan for one token count, with its scratch arena.
struct Llm::Step {
  Step(Runtime& rt, int64_t n, bool all) : plan(rt), n_tokens(n), all_logits(all) {}
  Plan plan;
  int64_t n_tokens;
  bool all_logits;
  std::vector<int32_t> tokens, positions;
  std::vector<float> logits;
  // Arena: f32 activations, and the quantized copy of the current matmul input.
  std::vector<float> x, h, q, k, v, attn, o, gate, up, act, down, router, out;
  std::vector<int8_t> xq;
  std::vector<float> xd;
  std::vector<int32_t> xs;
  std::vector<int8_t> xs8;
  // MoE scratch: routed rows of one expert.
  std::vector<float> ex, egate, eup, edown;
  QuantizedBuffers qbuf() {
    return {xq.data(), xd.data(), xs.data(), xs8.data(), static_cast<int64_t>(xq.size())};
  }
};

Llm::Llm(const std::string& path, Runtime& rt, int64_t n_ctx)
    : file_(GgufFile::open(path)),
      cfg_(ModelConfig::from_gguf(file_)),
      tok_(Tokenizer::from_gguf(file_)),
      packed_(file_, rt.pool()),
      rt_(rt) {
  n_ctx_ = n_ctx > 0 ? n_ctx : std::min<int64_t>(cfg_.n_ctx_train, 4096);
  const size_t f16 = dtype_bytes(DType::f16);
  for (int64_t l = 0; l < cfg_.n_layer; ++l) {
    k_cache_.emplace_back(f16 * k_cache_elems(n_ctx_, cfg_.n_head_kv, cfg_.head_dim));
    v_cache_.emplace_back(f16 * v_cache_elems(n_ctx_, cfg_.n_head_kv, cfg_.head_dim));
  }
  rope_table_ = rope_cos_sin_table(cfg_.rope_base, cfg_.rope_dim, n_ctx_);
}

Llm::~Llm() = default;

std::map<std::string, std::pair<double, int64_t>> Llm::profile_ms() const {
  std::map<std::string, std::pair<double, int64_t>> all;
  for (const auto& [key, s] : steps_)
    for (const auto& [label, p] : s->plan.profile_ms()) {
      all[label].first += p.first;
      all[label].second += p.second;
    }
  return all;
}

Llm::Step& Llm::step_for(int64_t n_tokens, bool all_logits) {
  auto& slot = steps_[{n_tokens, all_logits}];
  if (!slot) {
    slot = std::make_unique<Step>(rt_, n_tokens, all_logits);
    record(*slot);
  }
  return *slot;
}

const std::vector<float>& Llm::forward(const std::vector<int32_t>& tokens, bool all_logits,
                                       bool interpret) {
  if (tokens.empty()) throw Error("forward: no tokens");
  if (pos_ + static_cast<int64_t>(tokens.size()) > n_ctx_)
    throw Error("forward: " + std::to_string(pos_) + " + " + std::to_string(tokens.size()) +
                " tokens exceed the context of " + std::to_string(n_ctx_));
  for (int32_t t : tokens)
    if (t < 0 || t >= cfg_.n_vocab)
      throw Error("forward: token id " + std::to_string(t) + " is outside the vocabulary of " +
                  std::to_string(cfg_.n_vocab));
  Step& s = step_for(static_cast<int64_t>(tokens.size()), all_logits);
  s.tokens = tokens;
  for (int64_t i = 0; i < s.n_tokens; ++i) s.positions[i] = static_cast<int32_t>(pos_ + i);
  s.plan.set("pos0", pos_);
  s.plan.set("kv_len", pos_ + s.n_tokens);
  s.plan.profile(profiling_);
  s.plan.run(interpret);
  pos_ += s.n_tokens;
  last_launches_ = s.plan.kernel_launches();
  return s.logits;
}

void Llm::record(Step& s) {
  const ModelConfig& c = cfg_;
  const int64_t T = s.n_tokens, E = c.n_embd, D = c.head_dim;
  const int64_t QD = c.n_head * D, KD = c.n_head_kv * D;
  const int64_t F = c.moe() ? c.n_ff_exp : c.n_ff;
  const int64_t out_rows = s.all_logits ? T : 1;
  s.positions.resize(T);
  for (auto* b : {&s.x, &s.h, &s.o, &s.down}) b->resize(T * E);
  s.q.resize(T * QD);
  s.attn.resize(T * QD);
  s.k.resize(T * KD);
  s.v.resize(T * KD);
  for (auto* b : {&s.gate, &s.up, &s.act}) b->resize(T * F);
  s.out.resize(out_rows * E);
  s.logits.resize(out_rows * c.n_vocab);
  // Every matmul input: the norms' (E), the FFN activation (F) and the
  // attention output (QD, wider than E when head_dim * n_head > n_embd).
  int64_t kmax = std::max({E, F, QD});
  s.xq.resize(T * kmax);
  s.xd.resize(T * kmax / 32);
  s.xs.resize(T * kmax / 32);
  s.xs8.resize(split_sum_bytes(T * kmax / 32));
  Plan& p = s.plan;
  auto add = [&](const std::string& label, const LaunchDesc& d,
                 const std::map<std::string, int64_t>& probe = {}) {
    p.launch(label, d.kernel, d.dtypes, d.args, d.sizes, d.fixed, probe);
  };
  auto tensor = [&](const std::string& name) -> const GgufTensor& { return file_.tensor(name); };
  auto f32 = [&](const std::string& name) {
    const GgufTensor& t = tensor(name);
    if (t.type != GgmlType::f32) throw Error("tensor '" + name + "' must be F32");
    return reinterpret_cast<const float*>(t.data);
  };
  // y = x W^T, quantising x first when W is block-quantized, unless
  // `same_input` says x is the previous linear's input, unchanged since.
  const float* quantized_for = nullptr;
  int64_t quantized_block = 0;
  auto linear = [&](const std::string& label, const WeightView& w, const float* x, float* y,
                    int64_t rows, bool same_input = false) {
    int64_t qb = activation_block(w.type);
    if (is_block_quantized(w.type) &&
        !(same_input && quantized_for == x && quantized_block == qb)) {
      add("quantize", quantize_activations(x, rows, w.k, s.qbuf(), qb));
      quantized_for = x;
      quantized_block = qb;
    }
    add(label, matmul(w, x, s.qbuf(), y, rows));
  };
  auto rmsnorm = [&](const std::string& label, float* x, const float* w, float* y, int64_t rows,
                     int64_t n) {
    add(label, {"rmsnorm",
                {{"T", DType::f32}},
                {Arg::buffer(x, rows * n), Arg::buffer(mut(w), n), Arg::buffer(y, rows * n),
                 Arg::scalar_int(n), Arg::scalar_float(c.rms_eps)},
                {{"rows", rows}},
                {}});
  };
  auto add_into = [&](const std::string& label, float* x, float* y, int64_t n) {
    add(label, {"add",
                {{"T", DType::f32}},
                {Arg::buffer(x, n), Arg::buffer(y, n), Arg::buffer(x, n), Arg::scalar_int(n)},
                {},
                {}});
  };
  auto rope = [&](const std::string& label, float* x, int64_t heads) {
    add(label,
        {"rope",
         {{"T", DType::f32}},
         {Arg::buffer(x, T * heads * D), Arg::buffer(rope_table_.data(), rope_table_.size()),
          Arg::buffer(s.positions.data(), T), Arg::scalar_int(heads), Arg::scalar_int(n_ctx_)},
         {{"tokens", T}},
         {{"HEAD_DIM", D}, {"ROT", c.rope_dim}, {"NEOX", c.rope_neox ? 1 : 0}}});
  };
  auto bias = [&](const std::string& name, float* y, int64_t n) {
    const float* b = f32(name);
    p.host("bias", [=] {
      for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < n; ++i) y[t * n + i] += b[i];
    });
  };

  // Token embeddings: one dequantised row per token.
  const GgufTensor& embd = tensor("token_embd.weight");
  p.host("embed", [&s, &embd, E] {
    for (size_t t = 0; t < s.tokens.size(); ++t) dequantize_row(embd, s.tokens[t], &s.x[t * E]);
  });

  for (int64_t l = 0; l < c.n_layer; ++l) {
    std::string b = "blk." + std::to_string(l) + ".";
    rmsnorm("attn_norm", s.x.data(), f32(b + "attn_norm.weight"), s.h.data(), T, E);
    linear("attn_q", weight(tensor(b + "attn_q.weight"), packed_), s.h.data(), s.q.data(), T);
    linear("attn_k", weight(tensor(b + "attn_k.weight"), packed_), s.h.data(), s.k.data(), T, true);
    linear("attn_v", weight(tensor(b + "attn_v.weight"), packed_), s.h.data(), s.v.data(), T, true);
    if (c.qkv_bias) {
      bias(b + "attn_q.bias", s.q.data(), QD);
      bias(b + "attn_k.bias", s.k.data(), KD);
      bias(b + "attn_v.bias", s.v.data(), KD);
    }
    if (c.qk_norm) {
      rmsnorm("attn_q_norm", s.q.data(), f32(b + "attn_q_norm.weight"), s.q.data(), T * c.n_head,
              D);
      rmsnorm("attn_k_norm", s.k.data(), f32(b + "attn_k_norm.weight"), s.k.data(), T * c.n_head_kv,
              D);
    }
    rope("rope_q", s.q.data(), c.n_head);
    rope("rope_k", s.k.data(), c.n_head_kv);
    // The new keys and values join the f16 cache at their positions.
    uint8_t* kc = k_cache_[l].data();
    uint8_t* vc = v_cache_[l].data();
    const int64_t k_elems = k_cache_elems(n_ctx_, c.n_head_kv, D),
                  v_elems = v_cache_elems(n_ctx_, c.n_head_kv, D);
    add("kv_store",
        {"kv_cache_store",
         {{"KV", DType::f16}},
         {Arg::buffer(s.k.data(), T * KD), Arg::buffer(s.v.data(), T * KD),
          Arg::buffer(kc, k_elems), Arg::buffer(vc, v_elems), Arg::scalar_int(T),
          Arg::scalar_int(c.n_head_kv), Arg::scalar_int(n_ctx_), Plan::Dynamic{"pos0"}},
         {},
         {{"HEAD_DIM", D}}},
        {{"pos0", n_ctx_ - T}});
    add(T == 1 ? "attention_decode" : "attention_prefill",
        {T == 1 ? "attention_decode" : "attention_prefill",
         {{"KV", DType::f16}},
         {Arg::buffer(s.q.data(), T * QD), Arg::buffer(kc, k_elems), Arg::buffer(vc, v_elems),
          Arg::buffer(s.attn.data(), T * QD), Arg::scalar_int(T), Arg::scalar_int(c.n_head),
          Arg::scalar_int(c.n_head_kv), Arg::scalar_int(n_ctx_), Plan::Dynamic{"kv_len"},
          Plan::Dynamic{"pos0"}, Arg::scalar_float(1.0 / std::sqrt(static_cast<double>(D)))},
         {},
         {{"HEAD_DIM", D}}},
        {{"kv_len", n_ctx_}, {"pos0", n_ctx_ - T}});
    linear("attn_output", weight(tensor(b + "attn_output.weight"), packed_), s.attn.data(),
           s.o.data(), T);
    add_into("residual", s.x.data(), s.o.data(), T * E);
    rmsnorm("ffn_norm", s.x.data(), f32(b + "ffn_norm.weight"), s.h.data(), T, E);
    if (!c.moe()) {
      linear("ffn_gate", weight(tensor(b + "ffn_gate.weight"), packed_), s.h.data(), s.gate.data(),
             T);
      linear("ffn_up", weight(tensor(b + "ffn_up.weight"), packed_), s.h.data(), s.up.data(), T,
             true);
      add("silu_mul", {"silu_mul",
                       {{"T", DType::f32}},
                       {Arg::buffer(s.gate.data(), T * F), Arg::buffer(s.up.data(), T * F),
                        Arg::buffer(s.act.data(), T * F), Arg::scalar_int(T * F)},
                       {},
                       {}});
      linear("ffn_down", weight(tensor(b + "ffn_down.weight"), packed_), s.act.data(),
             s.down.data(), T);
    } else {
      s.router.resize(T * c.n_expert);
      linear("ffn_gate_inp", weight(tensor(b + "ffn_gate_inp.weight"), packed_), s.h.data(),
             s.router.data(), T);
      const GgufTensor* gate_e = &tensor(b + "ffn_gate_exps.weight");
      const GgufTensor* up_e = &tensor(b + "ffn_up_exps.weight");
      const GgufTensor* down_e = &tensor(b + "ffn_down_exps.weight");
      // Routing depends on the data: the experts run with the token counts
      // routed to them, launched as the host step decides.
      p.host("moe_experts", [this, &s, gate_e, up_e, down_e, T, E, F] {
        const ModelConfig& c = cfg_;
        std::vector<std::vector<std::pair<int64_t, float>>> routed(c.n_expert);
        std::vector<int64_t> order(c.n_expert);
        std::vector<double> prob(c.n_expert);
        for (int64_t t = 0; t < T; ++t) {
          const float* r = &s.router[t * c.n_expert];
          float mx = *std::max_element(r, r + c.n_expert);
          double total = 0;
          for (int64_t e = 0; e < c.n_expert; ++e) total += prob[e] = std::exp(r[e] - mx);
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(),
                           [&](int64_t a, int64_t b) { return r[a] > r[b]; });
          double chosen = 0;
          for (int64_t j = 0; j < c.n_expert_used; ++j) chosen += prob[order[j]];
          for (int64_t j = 0; j < c.n_expert_used; ++j) {
            int64_t e = order[j];
            double w = prob[e] / (c.norm_topk ? chosen : total);
            routed[e].emplace_back(t, static_cast<float>(w));
          }
        }
        std::fill(s.down.begin(), s.down.end(), 0.0f);
        for (int64_t e = 0; e < c.n_expert; ++e) {
          int64_t n = static_cast<int64_t>(routed[e].size());
          if (n == 0) continue;
          s.ex.resize(n * E);
          s.egate.resize(n * F);
          s.eup.resize(n * F);
          s.edown.resize(n * E);
          for (int64_t i = 0; i < n; ++i)
            std::copy_n(&s.h[routed[e][i].first * E], E, &s.ex[i * E]);
          WeightView g = expert(*gate_e, e, packed_), u = expert(*up_e, e, packed_),
                     d = expert(*down_e, e, packed_);
          if (is_block_quantized(g.type))
            run_now(rt_,
                    quantize_activations(s.ex.data(), n, E, s.qbuf(), activation_block(g.type)));
          run_now(rt_, matmul(g, s.ex.data(), s.qbuf(), s.egate.data(), n));
          if (is_block_quantized(u.type) &&
              (!is_block_quantized(g.type) || activation_block(u.type) != activation_block(g.type)))
            run_now(rt_,
                    quantize_activations(s.ex.data(), n, E, s.qbuf(), activation_block(u.type)));
          run_now(rt_, matmul(u, s.ex.data(), s.qbuf(), s.eup.data(), n));
          rt_.call("silu_mul", {{"T", DType::f32}},
                   {Arg::buffer(s.egate.data(), n * F), Arg::buffer(s.eup.data(), n * F),
                    Arg::buffer(s.egate.data(), n * F), Arg::scalar_int(n * F)});
          if (is_block_quantized(d.type))
            run_now(rt_,
                    quantize_activations(s.egate.data(), n, F, s.qbuf(), activation_block(d.type)));
          run_now(rt_, matmul(d, s.egate.data(), s.qbuf(), s.edown.data(), n));
          for (int64_t i = 0; i < n; ++i) {
            float w = routed[e][i].second;
            float* dst = &s.down[routed[e][i].first * E];
            for (int64_t j = 0; j < E; ++j) dst[j] += w * s.edown[i * E + j];
          }
        }
      });
    }
    add_into("residual", s.x.data(), s.down.data(), T * E);
  }
  // Final norm, then the output projection of the rows asked for.
  float* last = s.x.data() + (T - out_rows) * E;
  rmsnorm("output_norm", last, f32("output_norm.weight"), s.out.data(), out_rows, E);
  const GgufTensor* out_w = file_.find_tensor("output.weight");
  linear("output", weight(out_w ? *out_w : embd, packed_), s.out.data(), s.logits.data(), out_rows);
}

}  // namespace kiln
