#include "models/llm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "ir/dtype.h"
#include "ir/error.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/rope/rope.h"
#include "models/arch/arch.h"
#include "models/hf_checkpoint.h"
#include "runtime/kv_page_pool.h"

namespace kiln {

// The plan for one token count, over the scratch its graph planned.
struct Llm::Step {
  Step(Runtime& rt, int64_t n, bool all, bool hidden, int64_t seqs = 0, int64_t outs = 0)
      : graph(rt),
        plan(rt),
        n_tokens(n),
        all_logits(all),
        hidden(hidden),
        n_seqs(seqs),
        out_rows(seqs > 0 ? outs
                 : all    ? n
                          : 1) {}
  Graph graph;
  Plan plan;
  int64_t n_tokens;
  bool all_logits;
  bool hidden;                             // rows of final hidden states, not logits
  int64_t n_seqs;                          // > 0: a serving step (forward_batch)
  int64_t out_rows;                        // rows of logits (or hidden states)
  std::vector<int32_t> tokens, positions;  // host, read or uploaded per replay
  std::vector<float> logits;               // host, written or downloaded per replay (or hidden)
  // A serving step's packed batch (ops::SeqBatch) and logit rows, likewise.
  std::vector<int32_t> cu_seqlens, seq_pos0, seq_len, tok_seq, tables, out_ids;
  // Llm::activations' step: the named activations, copied out per replay.
  bool dumping = false;
  std::list<DumpedTensor> dump;
};

namespace {

bool auto_asymmetric_enabled() {
  const char* e = std::getenv("KILN_AURA_AUTO_ASYM");
  return e && std::strcmp(e, "1") == 0;
}

}  // namespace

int64_t Llm::context_for(const ModelConfig& c, int64_t n_ctx) {
  return n_ctx > 0 ? n_ctx : std::min<int64_t>(c.n_ctx_train, 4096);
}

Llm::Llm(const std::string& path, Runtime& rt, int64_t n_ctx, KvCacheType kv, int64_t kv_page,
         int64_t kv_pages)
    : Llm(open_model_file(path), rt, n_ctx, kv, kv_page, kv_pages) {}

Llm::Llm(GgufFile file, Runtime& rt, int64_t n_ctx, KvCacheType kv, int64_t kv_page,
         int64_t kv_pages)
    : file_(std::move(file)),
      cfg_(ModelConfig::from_gguf(file_)),
      tok_(Tokenizer::from_gguf(file_)),
      rt_(rt),
      weights_(file_, rt) {
  if (!is_kv_cache_dtype(kv.dtype))
    throw Error("KV cache dtype " + std::string(dtype_name(kv.dtype)) +
                " is not supported (f16, bf16, f32, q8_0 or an AURA scheme)");
  if (is_quantized_kv(kv.dtype) && cfg_.head_dim % kKvQuantBlock)
    throw Error("a q8_0 KV cache needs a head size that is a multiple of " +
                std::to_string(kKvQuantBlock) + "; this model's is " +
                std::to_string(cfg_.head_dim));
  const bool aura = is_aura_kv(kv.dtype);
  if (aura) {
    check_aura_scheme(kv.aura);
    if (kv_page != 0)
      throw Error("KV cache " + aura_scheme_name(kv.aura) + ": an AURA cache cannot be paged");
    if (auto_asymmetric_enabled())
      kv.aura = aura_auto_asymmetric(kv.aura, cfg_.n_head / cfg_.n_head_kv);
  }
  kv_ = kv;
  n_ctx_ = context_for(cfg_, n_ctx);
  cfg_.choose_rope_factors(n_ctx_);
  Backend& b = rt.backend();
  const size_t elem = dtype_bytes(kv_.dtype);
  const int64_t D = aura_padded_dim(cfg_.head_dim);
  key_block_ = kv_key_block(b.target_desc());  // the cache is laid out for this backend's kernels
  if (kv_page < 0 || kv_page % key_block_)
    throw Error("KV page of " + std::to_string(kv_page) + " rows: must be a multiple of " +
                std::to_string(key_block_) + " (the key block)");
  page_ = kv_page;
  if (kv_pages < 0 || (kv_pages > 0 && page_ == 0))
    throw Error("a serving KV pool of " + std::to_string(kv_pages) +
                " pages: needs a page size (kv_page > 0) and >= 1 page");
  if (kv_pages > 0) {
    serving_ = true;  // each step brings its sequences' tables
    n_pages_ = kv_pages;
  } else if (page_ > 0) {
    // One sequence holding the whole context; every layer's pool numbers
    // its pages alike, so one table serves them all.
    KvPagePool pool((n_ctx_ + page_ - 1) / page_, page_);
    auto seq = pool.create();
    pool.append(seq, n_ctx_);
    n_pages_ = pool.n_pages();
    const std::vector<int32_t>& table = pool.table(seq);
    block_table_.emplace(b, table.size() * sizeof(int32_t));
    b.upload(block_table_->data(), table.data(), block_table_->bytes());
  }
  for (int64_t l = 0; l < cfg_.n_layer; ++l) {
    if (aura) {
      // Codes and norms (aura_format.h), and the layer's rotations.
      const int64_t rows = cfg_.n_head_kv * n_ctx_;
      k_cache_.emplace_back(b, 4 * rows * packed_words(D, kv_.aura.kbits));
      v_cache_.emplace_back(b, 4 * rows * packed_words(D, kv_.aura.vbits));
      k_scale_.emplace_back(b, sizeof(uint16_t) * rows);
      v_scale_.emplace_back(b, sizeof(uint16_t) * rows);
      const std::vector<float> ks = aura_signs(kAuraSeed, l, AuraKind::k, D),
                               vs = aura_signs(kAuraSeed, l, AuraKind::v, D);
      auto upload = [&](std::vector<DeviceBuffer>& to, const std::vector<float>& m) {
        to.emplace_back(b, m.size() * sizeof(float));
        b.upload(to.back().data(), m.data(), to.back().bytes());
      };
      upload(k_rot_, aura_forward_matrix(ks));
      upload(v_rot_, aura_forward_matrix(vs));
      upload(v_unrot_, aura_inverse_matrix(vs));
    }
    const int64_t k_elems = page_
                                ? k_pool_elems(n_pages_, cfg_.n_head_kv, cfg_.head_dim, page_)
                                : k_cache_elems(n_ctx_, cfg_.n_head_kv, cfg_.head_dim, key_block_);
    const int64_t v_elems = page_ ? v_pool_elems(n_pages_, cfg_.n_head_kv, cfg_.head_dim, page_)
                                  : v_cache_elems(n_ctx_, cfg_.n_head_kv, cfg_.head_dim);
    if (!aura) {
      k_cache_.emplace_back(b, elem * k_elems);
      v_cache_.emplace_back(b, elem * v_elems);
    }
    if (is_quantized_kv(kv_.dtype)) {
      k_scale_.emplace_back(b, sizeof(uint16_t) * (k_elems / kKvQuantBlock));
      v_scale_.emplace_back(b, sizeof(uint16_t) * (v_elems / kKvQuantBlock));
    }
    std::pair<double, RopeScaling> rope{cfg_.rope_base_for(l), cfg_.rope_scaling_for(l)};
    auto it = rope_tables_.find(rope);
    if (it == rope_tables_.end()) {
      std::vector<float> table = rope_cos_sin_table(rope.first, cfg_.rope_dim, n_ctx_, rope.second);
      it = rope_tables_.emplace(rope, DeviceBuffer(b, table.size() * sizeof(float))).first;
      b.upload(it->second.data(), table.data(), it->second.bytes());
    }
    layer_rope_.push_back(&it->second);
  }
  if (!cfg_.expert_map.empty()) {
    expert_map_.emplace(b, cfg_.expert_map.size() * sizeof(int32_t));
    b.upload(expert_map_->data(), cfg_.expert_map.data(), expert_map_->bytes());
  }
  try {
    for (const auto* bufs : {&k_cache_, &v_cache_, &k_scale_, &v_scale_})
      for (const DeviceBuffer& buf : *bufs) b.commit(buf.data(), buf.bytes());
  } catch (const Error& e) {
    throw Error("KV cache of " + std::to_string(kv_cache_bytes() >> 20) + " MiB for a context of " +
                std::to_string(n_ctx_) + " tokens: " + e.what());
  }
}

Llm::~Llm() = default;

size_t Llm::kv_cache_bytes() const {
  size_t n = 0;
  for (const auto* v : {&k_cache_, &v_cache_, &k_scale_, &v_scale_})
    for (const DeviceBuffer& b : *v) n += b.bytes();
  return n;
}

Llm::MemoryUse Llm::memory() const {
  MemoryUse m{weights_.file_bytes(), weights_.copied_bytes(), kv_cache_bytes(), 0};
  for (const auto& [key, s] : steps_) m.scratch += s->graph.scratch_bytes();
  for (const auto& [key, s] : batch_steps_) m.scratch += s->graph.scratch_bytes();
  return m;
}

Llm::Step& Llm::step_for(int64_t n_tokens, bool all_logits, bool hidden) {
  auto& slot = steps_[{n_tokens, all_logits, hidden}];
  if (!slot) {
    slot = std::make_unique<Step>(rt_, n_tokens, all_logits, hidden);
    record(*slot);
  }
  return *slot;
}

const std::vector<float>& Llm::forward(const std::vector<int32_t>& tokens, bool all_logits,
                                       bool interpret) {
  return run(tokens, all_logits, false, interpret);
}

const std::vector<float>& Llm::hidden_states(const std::vector<int32_t>& tokens) {
  return run(tokens, true, true, false);
}

void Llm::check_tokens(const std::vector<int32_t>& tokens) const {
  if (serving_)
    throw Error("forward: this model's cache is a serving pool of " + std::to_string(n_pages_) +
                " pages; run its sequences with forward_batch");
  if (tokens.empty()) throw Error("forward: no tokens");
  if (pos_ + static_cast<int64_t>(tokens.size()) > n_ctx_)
    throw Error("forward: " + std::to_string(pos_) + " + " + std::to_string(tokens.size()) +
                " tokens exceed the context of " + std::to_string(n_ctx_));
  for (int32_t t : tokens)
    if (t < 0 || t >= cfg_.n_vocab)
      throw Error("forward: token id " + std::to_string(t) + " is outside the vocabulary of " +
                  std::to_string(cfg_.n_vocab));
}

const std::vector<float>& Llm::run(const std::vector<int32_t>& tokens, bool all_rows, bool hidden,
                                   bool interpret) {
  check_tokens(tokens);
  return replay(step_for(static_cast<int64_t>(tokens.size()), all_rows, hidden), tokens, interpret);
}

const std::vector<float>& Llm::replay(Step& s, const std::vector<int32_t>& tokens, bool interpret) {
  std::copy(tokens.begin(), tokens.end(), s.tokens.begin());  // in place: plans point at it
  for (int64_t i = 0; i < s.n_tokens; ++i) s.positions[i] = static_cast<int32_t>(pos_ + i);
  s.plan.set("pos0", pos_);
  s.plan.set("kv_len", pos_ + s.n_tokens);
  TraceScope span(trace_, "forward", "forward", {{"tokens", s.n_tokens}, {"pos0", pos_}});
  s.plan.trace(trace_);
  s.plan.run(rt_, interpret);
  pos_ += s.n_tokens;
  last_launches_ = s.plan.kernel_launches();
  return s.logits;
}

std::list<DumpedTensor> Llm::activations(const std::vector<int32_t>& tokens,
                                         const std::function<void(size_t bytes)>& check) {
  reset();
  check_tokens(tokens);
  Step s(rt_, static_cast<int64_t>(tokens.size()), /*all=*/true, /*hidden=*/false);
  s.dumping = true;
  record(s);
  if (check) {
    size_t bytes = 0;
    for (const DumpedTensor& d : s.dump) bytes += d.data.size() * sizeof(float);
    check(bytes);
  }
  replay(s, tokens, false);
  return std::move(s.dump);
}

namespace {
// Serving plans kept: a step's shape is its token and sequence counts.
constexpr size_t kMaxBatchSteps = 48;
}  // namespace

Llm::Step& Llm::batch_step_for(int64_t n_tokens, int64_t n_seqs, int64_t out_rows, bool hidden) {
  const BatchShape key{n_tokens, n_seqs, out_rows, hidden};
  if (!batch_steps_.count(key) && batch_steps_.size() >= kMaxBatchSteps) {
    auto oldest =
        std::min_element(batch_used_.begin(), batch_used_.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    batch_steps_.erase(oldest->first);
    batch_used_.erase(oldest);
  }
  batch_used_[key] = ++batch_clock_;
  auto& slot = batch_steps_[key];
  if (!slot) {
    slot = std::make_unique<Step>(rt_, n_tokens, false, hidden, n_seqs, out_rows);
    record(*slot);
  }
  return *slot;
}

const std::vector<float>& Llm::forward_batch(const std::vector<SeqChunk>& seqs, bool interpret,
                                             bool hidden) {
  if (!serving_)
    throw Error("forward_batch: the model's KV cache is not a serving pool (kv_pages)");
  if (seqs.empty()) throw Error("forward_batch: no sequences");
  const int64_t entries = (n_ctx_ + page_ - 1) / page_;
  int64_t total = 0, outs = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SeqChunk& c = seqs[i];
    const std::string who = "forward_batch: sequence " + std::to_string(i) + ": ";
    const int64_t n = static_cast<int64_t>(c.tokens.size());
    if (n == 0) throw Error(who + "no tokens");
    if (c.pos0 < 0 || c.pos0 + n > n_ctx_)
      throw Error(who + "positions " + std::to_string(c.pos0) + " .. " +
                  std::to_string(c.pos0 + n - 1) + " are outside the context of " +
                  std::to_string(n_ctx_));
    for (int32_t t : c.tokens)
      if (t < 0 || t >= cfg_.n_vocab)
        throw Error(who + "token id " + std::to_string(t) + " is outside the vocabulary of " +
                    std::to_string(cfg_.n_vocab));
    const int64_t live = (c.pos0 + n + page_ - 1) / page_;
    if (static_cast<int64_t>(c.table.size()) > entries)
      throw Error(who + "a block table of " + std::to_string(c.table.size()) +
                  " pages, more than the context's " + std::to_string(entries));
    try {
      check_block_table(c.table, live, n_pages_);
    } catch (const Error& e) {
      throw Error(who + e.what());
    }
    total += n;
    outs += c.all_logits ? n : 1;
  }
  const int64_t S = static_cast<int64_t>(seqs.size());
  Step& s = batch_step_for(total, S, outs, hidden);
  int64_t row = 0, out = 0;
  for (int64_t i = 0; i < S; ++i) {
    const SeqChunk& c = seqs[static_cast<size_t>(i)];
    const int64_t n = static_cast<int64_t>(c.tokens.size());
    s.cu_seqlens[i] = static_cast<int32_t>(row);
    s.seq_pos0[i] = static_cast<int32_t>(c.pos0);
    s.seq_len[i] = static_cast<int32_t>(c.pos0 + n);
    for (int64_t j = 0; j < n; ++j, ++row) {
      s.tokens[row] = c.tokens[static_cast<size_t>(j)];
      s.positions[row] = static_cast<int32_t>(c.pos0 + j);
      s.tok_seq[row] = static_cast<int32_t>(i);
      if (c.all_logits || j == n - 1) s.out_ids[out++] = static_cast<int32_t>(row);
    }
    std::fill(std::copy(c.table.begin(), c.table.end(), s.tables.begin() + i * entries),
              s.tables.begin() + (i + 1) * entries, -1);
  }
  s.cu_seqlens[S] = static_cast<int32_t>(row);
  if (S == 1) {  // the single-sequence kernels (Forward::attention)
    s.plan.set("pos0", seqs[0].pos0);
    s.plan.set("kv_len", seqs[0].pos0 + total);
  }
  TraceScope span(trace_, "forward", "forward", {{"tokens", total}, {"sequences", S}});
  s.plan.trace(trace_);
  s.plan.run(rt_, interpret);
  last_launches_ = s.plan.kernel_launches();
  return s.logits;
}

void Llm::copy_kv_pages(const std::vector<KvPagePool::PageCopy>& copies) {
  if (!serving_) throw Error("copy_kv_pages: the model's KV cache is not a serving pool");
  Backend& b = rt_.backend();
  // One page of one head is one run in every buffer of the pool layout
  // (kv_cache.h): page * head_dim elements of codes, page * head_dim / 32
  // of a q8_0 cache's scales, at (head * n_pages + page) runs.
  const int64_t D = cfg_.head_dim, H = cfg_.n_head_kv;
  auto copy_runs = [&](const std::vector<DeviceBuffer>& bufs, int64_t run_elems, size_t esize) {
    const size_t run = static_cast<size_t>(run_elems) * esize;
    for (const DeviceBuffer& buf : bufs)
      for (const KvPagePool::PageCopy& c : copies) {
        if (c.from < 0 || c.from >= n_pages_ || c.to < 0 || c.to >= n_pages_)
          throw Error("copy_kv_pages: page " + std::to_string(c.from) + " -> " +
                      std::to_string(c.to) + " is outside the pool of " + std::to_string(n_pages_));
        auto* base = static_cast<uint8_t*>(buf.data());
        for (int64_t h = 0; h < H; ++h)
          b.copy(base + static_cast<size_t>(h * n_pages_ + c.to) * run,
                 base + static_cast<size_t>(h * n_pages_ + c.from) * run, run);
      }
  };
  const size_t elem = dtype_bytes(kv_.dtype);
  copy_runs(k_cache_, page_ * D, elem);
  copy_runs(v_cache_, page_ * D, elem);
  copy_runs(k_scale_, page_ * D / kKvQuantBlock, sizeof(uint16_t));
  copy_runs(v_scale_, page_ * D / kKvQuantBlock, sizeof(uint16_t));
}

void Llm::rewind(int64_t pos) {
  if (pos < 0 || pos > pos_)
    throw Error("rewind: position " + std::to_string(pos) + " is not in 0 .. " +
                std::to_string(pos_) + " (the tokens in the cache)");
  pos_ = pos;
}

void Llm::count_expert_hits() {
  if (!cfg_.moe()) throw Error("expert hits: the model has no experts (arch " + cfg_.arch + ")");
  if (!steps_.empty()) throw Error("expert hits: counting must start before the first forward");
  hits_.emplace(rt_.backend(), sizeof(int32_t) * cfg_.n_layer * cfg_.n_expert);
}

std::vector<int32_t> Llm::expert_hits() const {
  if (!hits_) throw Error("expert hits: count_expert_hits() was not called");
  std::vector<int32_t> out(static_cast<size_t>(cfg_.n_layer * cfg_.n_expert));
  rt_.backend().download(out.data(), hits_->data(), hits_->bytes());
  return out;
}

std::pair<size_t, size_t> Llm::scratch_bytes(int64_t n_tokens, bool all_logits) {
  Step& s = step_for(n_tokens, all_logits, false);
  return {s.graph.scratch_bytes(), s.graph.unplanned_bytes()};
}

std::vector<Spec> Llm::plan_specs(int64_t n_tokens) {
  if (serving_) throw Error("plan_specs: this model's cache is a serving pool");
  if (n_tokens < 1 || n_tokens > n_ctx_)
    throw Error("plan_specs: " + std::to_string(n_tokens) + " tokens for a context of " +
                std::to_string(n_ctx_));
  Step s(rt_, n_tokens, false, false);
  record(s, /*compile=*/false);
  return s.plan.specs();
}

void Llm::record(Step& s, bool compile) {
  const ModelConfig& c = cfg_;
  const int64_t T = s.n_tokens, S = s.n_seqs, out_rows = s.out_rows;
  s.tokens.resize(T);
  s.positions.resize(T);
  s.logits.resize(out_rows * (s.hidden ? c.n_embd : c.n_vocab));
  Graph& g = s.graph;
  Forward f(g, c, weights_, T, out_rows, n_ctx_);
  f.hidden = s.hidden;
  if (s.dumping) f.dump = &s.dump;
  f.tokens = g.input("input", s.tokens.data(), DType::i32, {T});
  f.positions = g.input("input", s.positions.data(), DType::i32, {T});
  if (S > 0) {
    const int64_t entries = (n_ctx_ + page_ - 1) / page_;
    auto input = [&](std::vector<int32_t>& v, int64_t n) {
      v.assign(static_cast<size_t>(n), 0);
      return g.input("input", v.data(), DType::i32, {n});
    };
    f.batch = ops::SeqBatch{S,
                            input(s.cu_seqlens, S + 1),
                            input(s.seq_pos0, S),
                            input(s.seq_len, S),
                            input(s.tok_seq, T),
                            input(s.tables, S * entries)};
    f.out_ids = input(s.out_ids, out_rows);
  }
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const DeviceBuffer &k = k_cache_[l], &v = v_cache_[l], &rope = *layer_rope_[l];
    const int64_t esize = static_cast<int64_t>(dtype_bytes(kv_.dtype));
    KvCache cache{.k = g.external(k.data(), kv_.dtype, {static_cast<int64_t>(k.bytes()) / esize}),
                  .v = g.external(v.data(), kv_.dtype, {static_cast<int64_t>(v.bytes()) / esize}),
                  .max_ctx = n_ctx_,
                  .n_kv_heads = c.n_head_kv,
                  .head_dim = c.head_dim,
                  .page = page_,
                  .n_pages = n_pages_};
    auto f16s = [&](const DeviceBuffer& d) {
      return g.external(d.data(), DType::f16, {static_cast<int64_t>(d.bytes() / 2)});
    };
    if (!k_scale_.empty()) {
      cache.k_scale = f16s(k_scale_[l]);
      cache.v_scale = f16s(v_scale_[l]);
    }
    if (is_aura_kv(kv_.dtype)) {
      auto matrix = [&](const DeviceBuffer& d) {
        return g.external(d.data(), DType::f32, {static_cast<int64_t>(d.bytes() / sizeof(float))});
      };
      cache.kbits = kv_.aura.kbits;
      cache.vbits = kv_.aura.vbits;
      cache.k_rot = matrix(k_rot_[l]);
      cache.v_rot = matrix(v_rot_[l]);
      cache.v_unrot = matrix(v_unrot_[l]);
    }
    if (S > 0)
      cache.table = f.batch->tables;
    else if (page_)
      cache.table = g.external(block_table_->data(), DType::i32,
                               {static_cast<int64_t>(block_table_->bytes() / sizeof(int32_t))});
    f.cache.push_back(cache);
    f.rope_table.push_back(
        g.external(rope.data(), DType::f32,
                   {static_cast<int64_t>(rope.bytes() / sizeof(float)) / c.rope_dim, c.rope_dim}));
    if (expert_map_)
      f.expert_map.push_back(
          g.external(expert_map_->as<int32_t>() + l * c.n_router, DType::i32, {c.n_router}));
    if (hits_)
      f.expert_hits.push_back(
          g.external(hits_->as<int32_t>() + l * c.n_expert, DType::i32, {c.n_expert}));
  }
  Tensor logits = arch_desc(c.arch).build(f);
  g.output("logits", logits, s.logits.data());
  g.record(s.plan, compile);
}

}  // namespace kiln
