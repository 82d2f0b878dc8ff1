// A decoder-only language model from a GGUF file (llama, qwen2, qwen3,
// qwen3moe), run as plans of compiled kernels on the runtime's backend.
//
// forward() takes the next tokens of the sequence: the first call is the
// prompt (prefill, batched kernels), later calls one token each (decode,
// GEMV). Each distinct token count is recorded once into a Plan over its
// own scratch buffers and the shared KV cache (f16, [n_ctx, n_kv_heads,
// head_dim] per layer), then replayed with the position patched in. Every
// step, the embedding lookup, biases and MoE routing included, is a kernel
// of the plan; the host only uploads token ids and positions and downloads
// logits. On host-memory backends weights are used in place in the mapped
// file, except block-quantized matrices, which are interleaved at load for
// the 16-row kernels (models/packed_weights.h); on a device they are
// uploaded once.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/gguf.h"
#include "models/model_config.h"
#include "models/packed_weights.h"
#include "models/tokenizer.h"
#include "runtime/backend.h"
#include "runtime/plan.h"

namespace kiln {

class Llm {
 public:
  // n_ctx: the KV cache's capacity in tokens (0: the model's training
  // context, capped at 4096).
  Llm(const std::string& path, Runtime& rt, int64_t n_ctx = 0);
  ~Llm();

  const ModelConfig& config() const { return cfg_; }
  const Tokenizer& tokenizer() const { return *tok_; }
  const GgufFile& file() const { return file_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t pos() const { return pos_; }  // tokens in the KV cache
  void reset() { pos_ = 0; }

  // Appends `tokens` to the sequence. Returns the logits [rows, n_vocab]:
  // every position's when all_logits, else the last token's only. With
  // `interpret`, every kernel runs in the reference interpreter.
  const std::vector<float>& forward(const std::vector<int32_t>& tokens, bool all_logits = false,
                                    bool interpret = false);

  // Records (selects and compiles the kernels of) the plan for n tokens
  // now, so that timing a forward does not include it.
  void prepare(int64_t n_tokens, bool all_logits = false) { step_for(n_tokens, all_logits); }

  // Kernel launches of the last forward's plan, and per-label profile.
  int64_t last_kernel_launches() const { return last_launches_; }
  void profile(bool on) { profiling_ = on; }
  std::map<std::string, std::pair<double, int64_t>> profile_ms() const;

 private:
  struct Step;
  Step& step_for(int64_t n_tokens, bool all_logits);
  void record(Step& s);

  GgufFile file_;
  ModelConfig cfg_;
  std::unique_ptr<Tokenizer> tok_;
  PackedWeights packed_;
  Runtime& rt_;
  int64_t n_ctx_ = 0, pos_ = 0;
  // A weight's bytes as the backend sees them (uploaded on first use when
  // the backend's memory is not the host's).
  const uint8_t* on_backend(const uint8_t* host, size_t bytes);
  struct WeightView weight(const GgufTensor& t);
  struct WeightView expert(const GgufTensor& t, int64_t e);
  const float* f32_weight(const std::string& name);

  // Per layer, f16; huge-page backed on the CPU: every decode step reads all of them.
  std::vector<DeviceBuffer> k_cache_, v_cache_;
  DeviceBuffer rope_table_;
  std::map<const uint8_t*, DeviceBuffer> uploaded_;
  std::map<std::pair<int64_t, bool>, std::unique_ptr<Step>> steps_;
  int64_t last_launches_ = 0;
  bool profiling_ = false;
};

}  // namespace kiln
