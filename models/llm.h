// A decoder-only language model from a GGUF file (llama, qwen2, qwen3,
// qwen3moe, gemma3), run as plans of compiled kernels on the runtime's
// backend.
//
// forward() takes the next tokens of the sequence: the first call is the
// prompt (prefill, batched kernels), later calls one token each (decode,
// GEMV). Each distinct token count is built once as a graph by the
// architecture's builder (models/arch/), whose scratch is planned by
// liveness, recorded into a Plan over it and the shared KV cache (f16 per
// layer, kernels/attention/kv_cache.h), then replayed with the position
// patched in. Every step, the embedding lookup, biases and MoE routing
// included, is a kernel of the plan; the host only uploads token ids and
// positions and downloads logits.
#pragma once

#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention/kv_cache.h"
#include "models/gguf.h"
#include "models/layers.h"
#include "models/model_config.h"
#include "models/model_weights.h"
#include "models/tokenizer.h"
#include "runtime/graph.h"
#include "runtime/kv_page_pool.h"

namespace kiln {

class Llm {
 public:
  // path: a GGUF file or a Hugging Face folder (models/hf_checkpoint.h).
  // n_ctx: the KV cache's capacity in tokens (0: the model's training
  // context, capped at 4096).
  // kv: the cache's element type, f16 (llama.cpp's default), bf16, f32,
  // q8_0, or an AURA scheme (kernels/aura/aura_format.h; with
  // KILN_AURA_AUTO_ASYM=1 in the environment, its auto-asymmetric rule
  // applies, and kv_type() names the scheme in effect).
  // kv_page > 0: each layer's cache is a paged pool (kv_cache.h) of pages
  // of kv_page rows, the sequence's pages listed by a block table
  // (KvPagePool), as a server holds many sequences. kv_pages > 0 (with
  // kv_page) makes it a serving pool of that many pages, shared by the
  // sequences of forward_batch; forward() is then refused.
  Llm(const std::string& path, Runtime& rt, int64_t n_ctx = 0, KvCacheType kv = DType::f16,
      int64_t kv_page = 0, int64_t kv_pages = 0);
  // The same over a model file already open (open_model_file).
  Llm(GgufFile file, Runtime& rt, int64_t n_ctx = 0, KvCacheType kv = DType::f16,
      int64_t kv_page = 0, int64_t kv_pages = 0);
  // The context a model of config c gets for n_ctx (0: its training
  // context, capped at 4096).
  static int64_t context_for(const ModelConfig& c, int64_t n_ctx);
  ~Llm();

  const ModelConfig& config() const { return cfg_; }
  const Tokenizer& tokenizer() const { return *tok_; }
  const GgufFile& file() const { return file_; }
  int64_t n_ctx() const { return n_ctx_; }
  DType kv_dtype() const { return kv_.dtype; }
  const KvCacheType& kv_type() const { return kv_; }
  // Bytes of every layer's KV cache, a q8_0 cache's scales and an AURA
  // cache's norms included (not its rotation matrices, which do not grow
  // with the context).
  size_t kv_cache_bytes() const;
  int64_t pos() const { return pos_; }  // tokens in the KV cache
  void reset() { pos_ = 0; }
  // Keeps the first `pos` tokens' keys and values (pos <= pos()), so that a
  // sequence sharing them (a server's next request with the same system
  // prompt) continues from there.
  void rewind(int64_t pos);

  // Appends `tokens` to the sequence. Returns the logits [rows, n_vocab]:
  // every position's when all_logits, else the last token's only. With
  // `interpret`, every kernel runs in the reference interpreter.
  const std::vector<float>& forward(const std::vector<int32_t>& tokens, bool all_logits = false,
                                    bool interpret = false);
  // Appends `tokens` as forward does; returns every position's final
  // hidden state (after the final norm) [rows, n_embd]: embeddings.
  const std::vector<float>& hidden_states(const std::vector<int32_t>& tokens);
  // Every activation the forward names (Forward::named: per layer the
  // roped queries and keys, attention and FFN outputs, the residual stream;
  // the final norm and logits) of a forward of `tokens` from position 0
  // (the cache is reset first), in the order they are computed. `check`
  // gets their total bytes before anything runs (a caller refuses a dump
  // its disk cannot hold). A plan of its own, not kept.
  std::list<DumpedTensor> activations(const std::vector<int32_t>& tokens,
                                      const std::function<void(size_t bytes)>& check = {});

  // One step of a serving engine over the pool (kv_pages > 0): each
  // sequence's new tokens, its first at position pos0, stored in and
  // attending to the rows of the pages its table lists (a KvPagePool's
  // table of the sequence, holding pos0 + tokens rows). Sequences bring one
  // token each (decode) or more (a prompt's chunk). Returns the logits
  // [rows, n_vocab]: each sequence's last token's, or with all_logits every
  // token's of that sequence (a prompt scored, as `echo` with logprobs
  // asks), in sequence order. With `hidden`, the same rows' final hidden
  // states [rows, n_embd] instead (embeddings).
  struct SeqChunk {
    std::vector<int32_t> tokens;
    int64_t pos0 = 0;
    std::vector<int32_t> table;
    bool all_logits = false;
  };
  const std::vector<float>& forward_batch(const std::vector<SeqChunk>& seqs, bool interpret = false,
                                          bool hidden = false);
  int64_t kv_page() const { return page_; }
  int64_t kv_pages() const { return serving_ ? n_pages_ : 0; }
  // Copies whole pages of the serving pool, every layer's K and V rows
  // (and a q8_0 cache's scales): a KvPagePool's copy-on-write, made before
  // the forward that writes into the copies.
  void copy_kv_pages(const std::vector<KvPagePool::PageCopy>& copies);

  // Records (selects and compiles the kernels of) the plan for n tokens
  // now, so that timing a forward does not include it.
  void prepare(int64_t n_tokens, bool all_logits = false) { step_for(n_tokens, all_logits, false); }
  // The kernel launches of the plan for n tokens as this runtime's backend
  // and kernel policy would record them, without compiling or keeping the
  // plan (`kiln inspect --model`).
  std::vector<Spec> plan_specs(int64_t n_tokens);

  // Kernel launches of the last forward's plan.
  int64_t last_kernel_launches() const { return last_launches_; }
  // Scratch bytes of the plan for n tokens as planned, and as one
  // allocation per intermediate would take.
  std::pair<size_t, size_t> scratch_bytes(int64_t n_tokens, bool all_logits = false);
  // Where the model's memory goes: the weights as the file holds them and
  // the copies made of them (interleaved, uploaded), the KV cache, and the
  // scratch arenas of the plans recorded so far.
  struct MemoryUse {
    size_t weights = 0, weight_copies = 0, kv_cache = 0, scratch = 0;
  };
  MemoryUse memory() const;
  // Each forward from now on adds a "forward" span and its plan's launch
  // and copy spans to `t` (runtime/trace.h); null stops.
  void trace(Trace* t) { trace_ = t; }

  // From now on every forward adds each MoE layer's routed (token, slot)
  // pairs per expert into a hit map on the backend (a kernel of the plan);
  // before the first forward only. Throws for a dense model.
  void count_expert_hits();
  // The hit map so far, [n_layer][n_expert] row-major.
  std::vector<int32_t> expert_hits() const;

 private:
  struct Step;
  Step& step_for(int64_t n_tokens, bool all_logits, bool hidden);
  Step& batch_step_for(int64_t n_tokens, int64_t n_seqs, int64_t out_rows, bool hidden);
  const std::vector<float>& run(const std::vector<int32_t>& tokens, bool all_rows, bool hidden,
                                bool interpret);
  void check_tokens(const std::vector<int32_t>& tokens) const;
  // Replays s (recorded for tokens.size() tokens) on `tokens` at pos_.
  const std::vector<float>& replay(Step& s, const std::vector<int32_t>& tokens, bool interpret);
  void record(Step& s, bool compile = true);

  GgufFile file_;
  ModelConfig cfg_;
  std::unique_ptr<Tokenizer> tok_;
  Runtime& rt_;
  ModelWeights weights_;
  int64_t n_ctx_ = 0, pos_ = 0, key_block_ = 0, page_ = 0, n_pages_ = 0;
  KvCacheType kv_;

  // Per layer, of kv_; huge-page backed on the CPU: every decode step reads
  // all of them. A q8_0 cache's f16 scales or an AURA cache's f16 norms
  // beside (kv_cache.h), and an AURA cache's rotations.
  std::vector<DeviceBuffer> k_cache_, v_cache_, k_scale_, v_scale_;
  std::vector<DeviceBuffer> k_rot_, v_rot_, v_unrot_;
  std::optional<DeviceBuffer> block_table_;  // paged: i32, the pages of every layer's pool
  std::optional<DeviceBuffer> hits_;         // i32 [n_layer, n_expert] when counting
  std::optional<DeviceBuffer> expert_map_;   // i32 [n_layer, n_router]: a full router's
  // cos/sin tables by (base, freq_scale), and each layer's.
  std::map<std::pair<double, RopeScaling>, DeviceBuffer> rope_tables_;
  std::vector<const DeviceBuffer*> layer_rope_;
  std::map<std::tuple<int64_t, bool, bool>, std::unique_ptr<Step>> steps_;
  // Serving: the plans of (tokens, sequences, output rows, hidden), the least
  // recently used dropped past kMaxBatchSteps (a server meets many shapes).
  bool serving_ = false;
  using BatchShape = std::tuple<int64_t, int64_t, int64_t, bool>;
  std::map<BatchShape, std::unique_ptr<Step>> batch_steps_;
  std::map<BatchShape, uint64_t> batch_used_;
  uint64_t batch_clock_ = 0;
  int64_t last_launches_ = 0;
  Trace* trace_ = nullptr;
};

}  // namespace kiln
