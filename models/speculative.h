// Speculative decoding: a cheap proposer guesses the next tokens, the
// target model scores them all in one forward, and the guesses it would
// itself have produced are kept.
//
// Why: one decode step reads every weight for one token, so a single
// stream is bound by memory bandwidth. Scoring K guesses in one forward
// reads the weights once for up to K + 1 tokens. The acceptance rule
// (Leviathan et al. 2023; Chen et al. 2023) keeps the output exactly the
// target's: greedy decoding gives the same tokens, sampling the same
// distribution, whatever the proposer guesses. Proposers are a smaller
// draft model with its own KV cache (DraftModel) and prompt lookup, which
// copies what followed the last n-gram's earlier occurrence (NgramDrafter).
// DraftLength picks K from the measured acceptance and costs, down to 0
// where guessing does not pay.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/llm.h"
#include "models/sampler.h"

namespace kiln {

// Up to K guessed tokens and, per token, the distribution it was drawn
// from; a drafter that chooses deterministically (greedy, prompt lookup)
// leaves `dists` empty: each guess had probability 1.
constexpr int64_t kMaxDraftTokens = 16;  // the largest K
// Throws naming --draft-k and the range unless 1 <= k <= kMaxDraftTokens.
void check_draft_k(int64_t k);

// What speculation did: verify steps, guesses made and kept.
struct SpecCounts {
  int64_t steps = 0, draft_tokens = 0, accepted_tokens = 0;
  void add(int64_t guesses, int64_t accepted);
  double acceptance_rate() const;       // kept / made
  double mean_accepted_length() const;  // tokens per verify step (the kept and one more)
};

struct Draft {
  std::vector<int32_t> tokens;
  std::vector<TokenDist> dists;
  // Draws one more guess with `sampler` from the draft's logits after
  // `seq` (the history and the guesses so far) and keeps its distribution.
  int32_t guess(Sampler& sampler, const float* logits, int64_t n_vocab,
                const std::vector<int32_t>& seq);
};

// A draft model's sampler: the target's settings, its own random stream.
SamplerOptions draft_sampler_options(SamplerOptions target);
// The rows of a draft cache holding `cached` that stay valid for
// `history`: what they share, but never the history's last token, which is
// read again for the logits after it.
int64_t reusable_rows(const std::vector<int32_t>& cached, const std::vector<int32_t>& history);

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Before the clock starts: records what reading a prompt of n tokens
  // and guessing takes (a draft model's plans).
  virtual void prepare(int64_t n_prompt) { (void)n_prompt; }
  // Called once with the prompt, as the target reads it.
  virtual void start(const std::vector<int32_t>& prompt) { (void)prompt; }
  // Up to k tokens to follow `history` (the prompt and every token emitted
  // so far). Fewer, or none, when it has no good guess.
  virtual Draft propose(const std::vector<int32_t>& history, int64_t k) = 0;
  virtual std::string name() const = 0;
};

// A smaller model of the same vocabulary guesses by decoding K tokens with
// the target's sampler settings. Its KV cache follows the accepted
// sequence: each proposal rewinds it to what the history shares with the
// tokens it holds and reads the rest.
class DraftModel : public Drafter {
 public:
  DraftModel(Llm& draft, const SamplerOptions& sampler);
  void prepare(int64_t n_prompt) override;
  void start(const std::vector<int32_t>& prompt) override;
  Draft propose(const std::vector<int32_t>& history, int64_t k) override;
  std::string name() const override { return "draft"; }

 private:
  // Brings the draft's cache to hold `history` but its last token, then
  // reads that token: returns the logits after it.
  const std::vector<float>& catch_up(const std::vector<int32_t>& history);
  Llm& draft_;
  Sampler sampler_;
  std::vector<int32_t> cached_;  // the tokens in the draft's KV cache
};

// Prompt lookup: the longest suffix of the history, of n_max tokens down to
// 1, that occurred earlier; the guesses are the tokens that followed its
// latest earlier occurrence. No model, so no cost but the search.
class NgramDrafter : public Drafter {
 public:
  explicit NgramDrafter(int64_t n_max = 3);
  Draft propose(const std::vector<int32_t>& history, int64_t k) override;
  std::string name() const override { return "ngram"; }

 private:
  int64_t n_max_;
};

// Parses `--spec`: "ngram" or "ngram:N" (N the longest n-gram, 1 to 8;
// default 3); returns N.
int64_t parse_spec_ngram(const std::string& spec);
inline std::unique_ptr<Drafter> make_spec_drafter(const std::string& spec) {
  return std::make_unique<NgramDrafter>(parse_spec_ngram(spec));
}

// The target's verdict on a draft. `rows` holds the target's logits after
// each of the K + 1 tokens it read (the last emitted token, then the
// guesses), [K + 1, n_vocab]; `history` ends with the last emitted token.
// Returns the tokens to emit: the accepted guesses, then one more, drawn
// from the target where it rejected a guess (from the residual
// max(0, p - q), renormalised) or after the last guess. `sampler` is the
// target's, `allowed` unused (no grammar).
struct Verdict {
  std::vector<int32_t> tokens;
  int64_t accepted = 0;  // guesses kept; tokens.size() == accepted + 1
};
Verdict verify_draft(Sampler& sampler, const float* rows, int64_t n_vocab,
                     const std::vector<int32_t>& history, const Draft& draft);

// Throws kiln::Error naming the first difference when the draft's
// vocabulary is not the target's (size, a token's text, BOS or EOS).
void check_draft_vocab(const Tokenizer& target, const Tokenizer& draft);
// A warning when the draft model is not smaller than the target ("" when
// it is): it then costs more than it can save.
std::string draft_size_warning(const Llm& target, const Llm& draft);

// How often a sequence's guesses are kept: a decayed count of kept and
// refused guesses (about the last 20 verify steps), so it follows drift.
// Each guess is taken as kept with this probability, independently; K
// guesses then yield E(K) = (1 - a^(K+1)) / (1 - a) tokens per step.
class Acceptance {
 public:
  void record(int64_t k, int64_t accepted);
  double rate() const;  // optimistic (0.8) until measured
  double expected_tokens(int64_t k) const;
  // Whether a sequence planned no guesses should guess once anyway: every
  // 16th step, twice as long after each probe that kept nothing (to 256).
  bool probe_due();
  void guessed(bool any) { since_probe_ = any ? 0 : since_probe_; }

 private:
  double kept_ = 0, missed_ = 0;
  int64_t since_probe_ = 0, probe_every_ = 16;
};

// K per sequence and step, from measured costs: a step that reads T tokens
// takes c0 + c1 T ms (a line fitted through every step timed, plain or
// verifying), each guess d ms of drafting. A guess pays when the tokens it
// adds per ms it adds exceed the step's tokens per ms: guesses are handed
// out greedily, next to the sequence whose next guess is likeliest kept
// (a^(K+1)), while that holds. One sequence (`kiln run`): K maximises its
// own speed. A full batch whose steps are bound by compute (c1 large
// against c0) gets few or none: continuous batching already reads the
// weights once for many tokens. Before the line is known (two token counts
// timed) every sequence gets one guess; `adaptive` false: always k_max. A
// sequence planned none still probes with one guess now and then
// (Acceptance::probe_due), where a guess sure to be kept would pay.
class SpecPlanner {
 public:
  explicit SpecPlanner(int64_t k_max, bool adaptive = true);
  // Guesses for each sequence whose acceptance is listed, in a step that
  // also reads `other_tokens` tokens (prompt chunks); at most `room[i]`
  // for sequence i.
  std::vector<int64_t> plan(const std::vector<Acceptance*>& seqs, const std::vector<int64_t>& room,
                            int64_t other_tokens = 0);
  void record_step(int64_t tokens, double ms);
  void record_draft(int64_t guesses, double ms);
  // The step line's value, and one sequence's speed-up at K over plain
  // steps (K draft steps and a step of K + 1 tokens for E(K) tokens,
  // against E(K) steps of 1): the cost model benchmarks check.
  double step_ms(int64_t tokens) const;
  double predicted_speedup(const Acceptance& a, int64_t k) const;
  bool known() const;

 private:
  int64_t k_max_;
  bool adaptive_;
  // Decayed sums for the least-squares line through (tokens, ms).
  double n_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
  double draft_ms_ = 0, draft_n_ = 0;
};

}  // namespace kiln
