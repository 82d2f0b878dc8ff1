// Picks the next token from logits: greedy, or temperature sampling after
// the penalties and top-k / top-p filtering, as llama.cpp's default chain
// orders them (penalties, top-k, top-p, temperature). The penalties are
// llama.cpp's too, over the last repeat_last_n tokens: a seen token's logit
// is divided by repeat_penalty (multiplied when negative), then lowered by
// frequency_penalty per time seen and presence_penalty once (OpenAI's
// fields, as llama-server maps them). Seeded, so a run repeats exactly.
//
// distribution() and draw() are the two halves of sample(): speculative
// decoding (models/speculative.h) needs the distribution a token is drawn
// from, the target's and the draft's, to accept or reject a guess.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace kiln {

struct SamplerOptions {
  double temperature = 0;  // <= 0: greedy (argmax, lowest id on ties)
  int64_t top_k = 40;      // <= 0: all
  double top_p = 0.95;     // >= 1: all
  double repeat_penalty = 1.0;
  int64_t repeat_last_n = 64;
  uint64_t seed = 0;
  double presence_penalty = 0, frequency_penalty = 0;
};

// The candidates a token is drawn from and their weights (unnormalised:
// a candidate's probability is its weight over the sum), best first.
// Greedy: the argmax alone.
struct TokenDist {
  std::vector<int32_t> ids;
  std::vector<double> weights;
  double total() const;
  double prob(int32_t id) const;  // 0 for a token not among the candidates
};

class Sampler {
 public:
  explicit Sampler(SamplerOptions o) : o_(o), rng_(o.seed) {}
  // `history`: the tokens so far (prompt and generated), for the penalties.
  // `allowed`: a bitmask (bit t of word t / 32) of the tokens that may be
  // picked (a grammar's), null for all; at least one must be set.
  int32_t sample(const float* logits, int64_t n_vocab, const std::vector<int32_t>& history,
                 const uint32_t* allowed = nullptr) {
    return draw(distribution(logits, n_vocab, history, allowed));
  }
  // The distribution sample() draws from, and the draw (greedy: no random
  // number is used).
  TokenDist distribution(const float* logits, int64_t n_vocab, const std::vector<int32_t>& history,
                         const uint32_t* allowed = nullptr) const;
  int32_t draw(const TokenDist& d);
  bool greedy() const { return o_.temperature <= 0; }
  // A uniform number in [0, 1) from the same seeded stream.
  double uniform();

 private:
  SamplerOptions o_;
  std::mt19937_64 rng_;
};

}  // namespace kiln
