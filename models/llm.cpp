#include "models/llm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

// get_rows' dtype and FMT for a table of ggml type t.
std::pair<DType, int64_t> row_format(const GgufTensor& t) {
  switch (t.type) {
    case GgmlType::f32: return {DType::f32, 0};
    case GgmlType::f16: return {DType::f16, 0};
    case GgmlType::bf16: return {DType::bf16, 0};
    default:
      if (is_block_quantized(t.type)) return {DType::u8, static_cast<int64_t>(t.type)};
      throw Error("tensor '" + t.name + "': rows of type " + ggml_type_name(t.type) +
                  " cannot be looked up");
  }
}

int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

}  // namespace

// The plan for one token count, with its scratch buffers.
struct Llm::Step {
  Step(Runtime& rt, int64_t n, bool all)
      : plan(rt), backend(rt.backend()), n_tokens(n), all_logits(all) {}
  Plan plan;
  Backend& backend;
  int64_t n_tokens;
  bool all_logits;
  std::vector<int32_t> tokens, positions;  // host, uploaded per replay
  std::vector<float> logits;               // host, downloaded per replay
  std::vector<DeviceBuffer> scratch;

  template <class T>
  T* alloc(int64_t n) {
    scratch.emplace_back(backend, static_cast<size_t>(n) * sizeof(T));
    // Host memory comes mapped, its pages faulted in on first touch: touch
    // them now, while recording, not in the plan's first (timed) replay.
    if (backend.host_visible()) std::memset(scratch.back().data(), 0, scratch.back().bytes());
    return scratch.back().as<T>();
  }
};

Llm::Llm(const std::string& path, Runtime& rt, int64_t n_ctx)
    : file_(GgufFile::open(path)),
      cfg_(ModelConfig::from_gguf(file_)),
      tok_(Tokenizer::from_gguf(file_)),
      packed_(file_, rt.pool()),
      rt_(rt) {
  n_ctx_ = n_ctx > 0 ? n_ctx : std::min<int64_t>(cfg_.n_ctx_train, 4096);
  Backend& b = rt.backend();
  const size_t f16 = dtype_bytes(DType::f16);
  for (int64_t l = 0; l < cfg_.n_layer; ++l) {
    k_cache_.emplace_back(b, f16 * k_cache_elems(n_ctx_, cfg_.n_head_kv, cfg_.head_dim));
    v_cache_.emplace_back(b, f16 * v_cache_elems(n_ctx_, cfg_.n_head_kv, cfg_.head_dim));
  }
  std::vector<float> table = rope_cos_sin_table(cfg_.rope_base, cfg_.rope_dim, n_ctx_);
  rope_table_ = DeviceBuffer(b, table.size() * sizeof(float));
  b.upload(rope_table_.data(), table.data(), rope_table_.bytes());
}

Llm::~Llm() = default;

const uint8_t* Llm::on_backend(const uint8_t* host, size_t bytes) {
  Backend& b = rt_.backend();
  if (b.host_visible()) return host;
  auto it = uploaded_.find(host);
  if (it == uploaded_.end()) {
    it = uploaded_.emplace(host, DeviceBuffer(b, bytes)).first;
    b.upload(it->second.data(), host, bytes);
  }
  return it->second.as<uint8_t>();
}

WeightView Llm::weight(const GgufTensor& t) {
  if (t.shape.size() != 2) throw Error("tensor '" + t.name + "' is not a matrix");
  return expert(t, 0);
}

// Expert e of a 3-D expert tensor (ne = [k, m, n_expert]); e = 0 of a matrix.
WeightView Llm::expert(const GgufTensor& t, int64_t e) {
  int64_t k = t.shape[0], m = t.shape[1];
  int64_t mats = t.shape.size() > 2 ? t.shape[2] : 1;
  const uint8_t* data = on_backend(t.data, t.nbytes);
  const uint8_t* rows16 = packed_.rows16(t);
  if (rows16) {
    int64_t bytes = ggml::rows16_bytes(static_cast<ggml::QuantType>(t.type), m, k);
    rows16 = on_backend(rows16, static_cast<size_t>(bytes * mats)) + e * bytes;
  }
  return {data + e * m * ggml_row_bytes(t.type, k), t.type, k, m, rows16};
}

const float* Llm::f32_weight(const std::string& name) {
  const GgufTensor& t = file_.tensor(name);
  if (t.type != GgmlType::f32) throw Error("tensor '" + name + "' must be F32");
  return reinterpret_cast<const float*>(on_backend(t.data, t.nbytes));
}

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
  std::copy(tokens.begin(), tokens.end(), s.tokens.begin());  // in place: plans point at it
  for (int64_t i = 0; i < s.n_tokens; ++i) s.positions[i] = static_cast<int32_t>(pos_ + i);
  s.plan.set("pos0", pos_);
  s.plan.set("kv_len", pos_ + s.n_tokens);
  s.plan.profile(profiling_);
  s.plan.run(rt_, interpret);
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
  s.tokens.resize(T);
  s.positions.resize(T);
  s.logits.resize(out_rows * c.n_vocab);
  // Host-memory backends read the host's inputs and write its logits in
  // place; devices get copies.
  const bool host = s.backend.host_visible();
  int32_t* tokens = host ? s.tokens.data() : s.alloc<int32_t>(T);
  int32_t* positions = host ? s.positions.data() : s.alloc<int32_t>(T);
  float *x = s.alloc<float>(T * E), *h = s.alloc<float>(T * E), *o = s.alloc<float>(T * E),
        *down = s.alloc<float>(T * E);
  float *q = s.alloc<float>(T * QD), *attn = s.alloc<float>(T * QD);
  float *k = s.alloc<float>(T * KD), *v = s.alloc<float>(T * KD);
  float *gate = s.alloc<float>(T * F), *up = s.alloc<float>(T * F), *act = s.alloc<float>(T * F);
  float* out = s.alloc<float>(out_rows * E);
  float* logits = host ? s.logits.data() : s.alloc<float>(out_rows * c.n_vocab);
  // Every matmul input: the norms' (E), the FFN activation (F) and the
  // attention output (QD, wider than E when head_dim * n_head > n_embd).
  const int64_t kmax = std::max({E, F, QD});
  QuantizedBuffers qbuf{s.alloc<int8_t>(T * kmax), s.alloc<float>(T * kmax / 32),
                        s.alloc<int32_t>(T * kmax / 32),
                        s.alloc<int8_t>(split_sum_bytes(T * kmax / 32)), T * kmax};
  Plan& p = s.plan;
  auto add = [&](const std::string& label, const LaunchDesc& d) {
    p.launch(label, d.kernel, d.dtypes, d.args, d.sizes, d.fixed);
  };
  auto tensor = [&](const std::string& name) -> const GgufTensor& { return file_.tensor(name); };
  // y = x W^T, quantising x first when W is block-quantized, unless
  // `same_input` says x is the previous linear's input, unchanged since.
  const float* quantized_for = nullptr;
  int64_t quantized_block = 0;
  auto linear = [&](const std::string& label, const WeightView& w, const float* in, float* y,
                    const TokenCount& rows, bool same_input = false) {
    int64_t qb = activation_block(w.type);
    if (is_block_quantized(w.type) &&
        !(same_input && quantized_for == in && quantized_block == qb)) {
      add("quantize", quantize_activations(in, rows, w.k, qbuf, qb));
      quantized_for = in;
      quantized_block = qb;
    }
    add(label, matmul(w, in, qbuf, y, rows));
  };
  auto rmsnorm = [&](const std::string& label, float* in, const float* w, float* y, int64_t rows,
                     int64_t n) {
    add(label, {"rmsnorm",
                {{"T", DType::f32}},
                {{"x", Arg::buffer(in, rows * n)},
                 {"w", Arg::buffer(mut(w), n)},
                 {"y", Arg::buffer(y, rows * n)},
                 {"n", Arg::scalar_int(n)},
                 {"eps", Arg::scalar_float(c.rms_eps)}},
                {{"rows", rows}},
                {}});
  };
  auto add_into = [&](const std::string& label, float* acc, float* y, int64_t n) {
    add(label, {"add",
                {{"T", DType::f32}},
                {{"x", Arg::buffer(acc, n)},
                 {"y", Arg::buffer(y, n)},
                 {"z", Arg::buffer(acc, n)},
                 {"n", Arg::scalar_int(n)}},
                {},
                {}});
  };
  auto rope = [&](const std::string& label, float* in, int64_t heads) {
    add(label, {"rope",
                {{"T", DType::f32}},
                {{"x", Arg::buffer(in, T * heads * D)},
                 {"cos_sin", Arg::buffer(rope_table_.data(), rope_table_.bytes() / sizeof(float))},
                 {"pos", Arg::buffer(positions, T)},
                 {"n_heads", Arg::scalar_int(heads)},
                 {"n_pos", Arg::scalar_int(n_ctx_)}},
                {{"tokens", T}},
                {{"HEAD_DIM", D}, {"ROT", c.rope_dim}, {"NEOX", c.rope_neox ? 1 : 0}}});
  };
  auto bias = [&](const std::string& name, float* y, int64_t n) {
    add("bias", {"add_rows",
                 {{"T", DType::f32}},
                 {{"x", Arg::buffer(y, T * n)},
                  {"b", Arg::buffer(mut(f32_weight(name)), n)},
                  {"n", Arg::scalar_int(n)}},
                 {{"rows", T}},
                 {}});
  };
  // out[i] = table[ids[i]] for `rows` ids, as f32.
  auto get_rows = [&](const std::string& label, const GgufTensor* table, const float* f32_table,
                      int64_t table_rows, const int32_t* ids, float* dst, int64_t n,
                      const TokenCount& rows) {
    auto [dtype, fmt] = table ? row_format(*table) : std::pair<DType, int64_t>{DType::f32, 0};
    const void* data =
        table ? static_cast<const void*>(on_backend(table->data, table->nbytes)) : f32_table;
    int64_t elems =
        table ? static_cast<int64_t>(table->nbytes) / dtype_bytes(dtype) : table_rows * n;
    add(label, {"get_rows",
                {{"W", dtype}},
                {{"table", Arg::buffer(mut(data), elems)},
                 {"ids", Arg::buffer(mut(ids), rows.t)},
                 {"out", Arg::buffer(dst, rows.t * n)},
                 {"n", Arg::scalar_int(n)},
                 {"rows", rows.times(1)}},
                {{"table_rows", table_rows}},
                {{"FMT", fmt}}});
  };

  if (!host) {
    p.upload("input", tokens, s.tokens.data(), T * sizeof(int32_t));
    p.upload("input", positions, s.positions.data(), T * sizeof(int32_t));
  }
  const GgufTensor& embd = tensor("token_embd.weight");
  get_rows("embed", &embd, nullptr, c.n_vocab, tokens, x, E, {T, ""});

  // MoE routing scratch: each token's experts, then each expert's tokens.
  const int64_t NE = c.n_expert, K = c.n_expert_used;
  int32_t *topk_ids = nullptr, *counts = nullptr, *expert_rows = nullptr;
  float *topk_w = nullptr, *router = nullptr, *expert_w = nullptr;
  float *ex = nullptr, *egate = nullptr, *eup = nullptr, *edown = nullptr;
  std::vector<std::string> count_slots;
  if (c.moe()) {
    topk_ids = s.alloc<int32_t>(T * K);
    topk_w = s.alloc<float>(T * K);
    router = s.alloc<float>(T * NE);
    counts = s.alloc<int32_t>(NE);
    expert_rows = s.alloc<int32_t>(NE * T);
    expert_w = s.alloc<float>(NE * T);
    ex = s.alloc<float>(T * E);
    egate = s.alloc<float>(T * F);
    eup = s.alloc<float>(T * F);
    edown = s.alloc<float>(T * E);
    for (int64_t e = 0; e < NE; ++e) count_slots.push_back("moe.count." + std::to_string(e));
  }

  for (int64_t l = 0; l < c.n_layer; ++l) {
    std::string b = "blk." + std::to_string(l) + ".";
    rmsnorm("attn_norm", x, f32_weight(b + "attn_norm.weight"), h, T, E);
    linear("attn_q", weight(tensor(b + "attn_q.weight")), h, q, {T, ""});
    linear("attn_k", weight(tensor(b + "attn_k.weight")), h, k, {T, ""}, true);
    linear("attn_v", weight(tensor(b + "attn_v.weight")), h, v, {T, ""}, true);
    if (c.qkv_bias) {
      bias(b + "attn_q.bias", q, QD);
      bias(b + "attn_k.bias", k, KD);
      bias(b + "attn_v.bias", v, KD);
    }
    if (c.qk_norm) {
      rmsnorm("attn_q_norm", q, f32_weight(b + "attn_q_norm.weight"), q, T * c.n_head, D);
      rmsnorm("attn_k_norm", k, f32_weight(b + "attn_k_norm.weight"), k, T * c.n_head_kv, D);
    }
    rope("rope_q", q, c.n_head);
    rope("rope_k", k, c.n_head_kv);
    // The new keys and values join the f16 cache at their positions.
    void* kc = k_cache_[l].data();
    void* vc = v_cache_[l].data();
    const int64_t k_elems = k_cache_elems(n_ctx_, c.n_head_kv, D),
                  v_elems = v_cache_elems(n_ctx_, c.n_head_kv, D);
    add("kv_store", {"kv_cache_store",
                     {{"KV", DType::f16}},
                     {{"xk", Arg::buffer(k, T * KD)},
                      {"xv", Arg::buffer(v, T * KD)},
                      {"k", Arg::buffer(kc, k_elems)},
                      {"v", Arg::buffer(vc, v_elems)},
                      {"n_tokens", Arg::scalar_int(T)},
                      {"n_kv_heads", Arg::scalar_int(c.n_head_kv)},
                      {"max_ctx", Arg::scalar_int(n_ctx_)},
                      {"pos0", Plan::Dynamic{"pos0", n_ctx_ - T}}},
                     {},
                     {{"HEAD_DIM", D}}});
    const std::string attention = T == 1 ? "attention_decode" : "attention_prefill";
    add(attention, {attention,
                    {{"KV", DType::f16}},
                    {{"q", Arg::buffer(q, T * QD)},
                     {"k", Arg::buffer(kc, k_elems)},
                     {"v", Arg::buffer(vc, v_elems)},
                     {"out", Arg::buffer(attn, T * QD)},
                     {"n_tokens", Arg::scalar_int(T)},
                     {"n_heads", Arg::scalar_int(c.n_head)},
                     {"n_kv_heads", Arg::scalar_int(c.n_head_kv)},
                     {"max_ctx", Arg::scalar_int(n_ctx_)},
                     {"kv_len", Plan::Dynamic{"kv_len", n_ctx_}},
                     {"pos0", Plan::Dynamic{"pos0", n_ctx_ - T}},
                     {"scale", Arg::scalar_float(1.0 / std::sqrt(static_cast<double>(D)))}},
                    {},
                    {{"HEAD_DIM", D}}});
    linear("attn_output", weight(tensor(b + "attn_output.weight")), attn, o, {T, ""});
    add_into("residual", x, o, T * E);
    rmsnorm("ffn_norm", x, f32_weight(b + "ffn_norm.weight"), h, T, E);
    if (!c.moe()) {
      linear("ffn_gate", weight(tensor(b + "ffn_gate.weight")), h, gate, {T, ""});
      linear("ffn_up", weight(tensor(b + "ffn_up.weight")), h, up, {T, ""}, true);
      add("silu_mul", {"silu_mul",
                       {{"T", DType::f32}},
                       {{"gate", Arg::buffer(gate, T * F)},
                        {"up", Arg::buffer(up, T * F)},
                        {"out", Arg::buffer(act, T * F)},
                        {"n", Arg::scalar_int(T * F)}},
                       {},
                       {}});
      linear("ffn_down", weight(tensor(b + "ffn_down.weight")), act, down, {T, ""});
    } else {
      // Routing: each token's top-k experts, then each expert's tokens,
      // whose counts come back to size that expert's launches.
      linear("ffn_gate_inp", weight(tensor(b + "ffn_gate_inp.weight")), h, router, {T, ""});
      add("moe_route", {"moe_topk",
                        {},
                        {{"logits", Arg::buffer(router, T * NE)},
                         {"ids", Arg::buffer(topk_ids, T * K)},
                         {"weights", Arg::buffer(topk_w, T * K)},
                         {"n_expert", Arg::scalar_int(NE)},
                         {"k", Arg::scalar_int(K)},
                         {"norm", Arg::scalar_int(c.norm_topk ? 1 : 0)}},
                        {{"tokens", T}},
                        {{"BLOCK", pow2_at_least(NE)}}});
      add("moe_route", {"moe_group",
                        {},
                        {{"ids", Arg::buffer(topk_ids, T * K)},
                         {"weights", Arg::buffer(topk_w, T * K)},
                         {"counts", Arg::buffer(counts, NE)},
                         {"rows", Arg::buffer(expert_rows, NE * T)},
                         {"row_weights", Arg::buffer(expert_w, NE * T)},
                         {"tokens", Arg::scalar_int(T)},
                         {"k", Arg::scalar_int(K)},
                         {"n_expert", Arg::scalar_int(NE)}},
                        {},
                        {}});
      p.read_slots("moe_route", counts, count_slots);
      add("moe_clear", {"fill",
                        {{"T", DType::f32}},
                        {{"x", Arg::buffer(down, T * E)},
                         {"n", Arg::scalar_int(T * E)},
                         {"value", Arg::scalar_float(0)}},
                        {},
                        {}});
      const GgufTensor& gate_e = tensor(b + "ffn_gate_exps.weight");
      const GgufTensor& up_e = tensor(b + "ffn_up_exps.weight");
      const GgufTensor& down_e = tensor(b + "ffn_down_exps.weight");
      for (int64_t e = 0; e < NE; ++e) {
        const TokenCount n{T, count_slots[e]};
        get_rows("moe_gather", nullptr, h, T, expert_rows + e * T, ex, E, n);
        quantized_for = nullptr;  // ex holds another expert's rows
        linear("moe_gate", expert(gate_e, e), ex, egate, n);
        linear("moe_up", expert(up_e, e), ex, eup, n, true);
        add("moe_silu_mul", {"silu_mul",
                             {{"T", DType::f32}},
                             {{"gate", Arg::buffer(egate, T * F)},
                              {"up", Arg::buffer(eup, T * F)},
                              {"out", Arg::buffer(egate, T * F)},
                              {"n", n.times(F)}},
                             {},
                             {}});
        linear("moe_down", expert(down_e, e), egate, edown, n);
        add("moe_scatter", {"moe_scatter",
                            {},
                            {{"y", Arg::buffer(edown, T * E)},
                             {"rows", Arg::buffer(expert_rows + e * T, T)},
                             {"row_weights", Arg::buffer(expert_w + e * T, T)},
                             {"out", Arg::buffer(down, T * E)},
                             {"n", Arg::scalar_int(E)},
                             {"count", n.times(1)}},
                            {{"out_rows", T}},
                            {}});
      }
    }
    add_into("residual", x, down, T * E);
  }
  // Final norm, then the output projection of the rows asked for.
  float* last = x + (T - out_rows) * E;
  rmsnorm("output_norm", last, f32_weight("output_norm.weight"), out, out_rows, E);
  const GgufTensor* out_w = file_.find_tensor("output.weight");
  linear("output", weight(out_w ? *out_w : embd), out, logits, {out_rows, ""});
  if (!host) p.download("logits", s.logits.data(), logits, s.logits.size() * sizeof(float));
}

}  // namespace kiln
