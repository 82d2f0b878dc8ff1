// Text generation over an Llm: prefill the prompt, then sample one token
// at a time until n tokens, EOS or a stop string, streaming each piece as it
// is decoded, with the timings `kiln run` reports.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/llm.h"
#include "models/logprobs.h"
#include "models/sampler.h"
#include "models/speculative.h"

namespace kiln {

class CompiledGrammar;

struct GenerationOptions {
  int64_t n_predict = 64;
  SamplerOptions sampler;
  std::vector<std::string> stop;  // stop strings (not included in the output)
  bool stop_at_eos = true;
  bool all_logits = false;  // keep every position's logits (logits_out)
  // >= 0: each generated token's log-probability and its `logprobs`
  // likeliest alternatives (models/logprobs.h). With prompt_logprobs the
  // prompt's tokens are scored too (all but the first): the serving
  // scheduler's (`echo`).
  int64_t logprobs = -1;
  bool prompt_logprobs = false;
  // The serving scheduler's embeddings: the prompt's final hidden states
  // pooled as the model says (ModelConfig::pooling) into
  // GenerationResult::embedding; nothing is generated.
  bool embed = false;
  // Constrained decoding (models/grammar/matcher.h), the serving
  // scheduler's: the generated text must match the grammar. Each token is
  // sampled among those that keep the text a prefix of a match, and the
  // end of sequence only once it is whole; the sequence ends when nothing
  // else can follow. With grammar_trigger, sampling is free until the text
  // (control tokens' text included) shows the trigger, and the grammar,
  // which begins with it, holds from there: a tool call in a reply that may
  // also be text.
  std::shared_ptr<const CompiledGrammar> grammar;
  std::string grammar_trigger;
  // Asked after each token; true ends the generation ("cancelled": a
  // server's client has gone).
  std::function<bool()> cancelled;
  // Speculative decoding (models/speculative.h): each decode step reads
  // the drafter's guesses of up to draft_k tokens in one forward and keeps
  // those the sampler would have produced (greedy: the same tokens; sampled:
  // the same distribution). K follows the measured acceptance and costs
  // (SpecPlanner; the first two steps are plain, its baseline, and the
  // third guesses once) unless draft_k_fixed.
  Drafter* drafter = nullptr;
  int64_t draft_k = 4;
  bool draft_k_fixed = false;
  // The first `cached` prompt tokens are already in the model's KV cache
  // (model.pos() == cached): only the rest is prefilled.
  int64_t cached = 0;
};

struct GenerationResult {
  std::vector<int32_t> prompt, generated;
  std::string text;
  // Serving: from joining the scheduler to its first step (waiting for
  // room in the batch and the pool).
  double queue_ms = 0;
  double prefill_ms = 0;
  std::vector<double> token_ms;  // per decoded token
  std::vector<float> logits;     // [positions, n_vocab] when all_logits
  // Per generated token, and per prompt token from the second on, when
  // asked (GenerationOptions::logprobs, prompt_logprobs).
  std::vector<TokenLogprob> logprobs, prompt_logprobs;
  std::vector<float> embedding;  // [n_embd], when GenerationOptions::embed
  int64_t launches_prefill = 0, launches_per_token = 0;
  std::string stop_reason;  // "length", "eos", "stop string", "cancelled"
  // Speculation: verify forwards, guesses made and kept, and the time the
  // drafter and the verify forwards took (in token_ms too).
  SpecCounts spec;
  double draft_ms = 0, verify_ms = 0;
  double spec_predicted_speedup = 0;  // the cost model's, at the mean K used
};

// The text of generated tokens as a stream may show it: a piece is released
// once it can no longer be the start of a stop string, so a stop string
// never reaches the stream, and the text ends before the first stop string.
class StopText {
 public:
  StopText(const Tokenizer& tok, std::vector<std::string> stop)
      : tok_(tok), stop_(std::move(stop)) {}
  // Adds a token's piece; returns the text released by it.
  std::string push(int32_t token);
  bool stopped() const { return stopped_; }  // a stop string was met
  std::string flush();                       // the text held back, at the end

 private:
  const Tokenizer& tok_;
  std::vector<std::string> stop_;
  std::string pending_;
  bool stopped_ = false;
};

// `on_text` receives each newly decoded piece of text.
GenerationResult generate(Llm& model, const std::vector<int32_t>& prompt,
                          const GenerationOptions& o,
                          const std::function<void(const std::string&)>& on_text = nullptr);

}  // namespace kiln
