// Picks the next token from logits: greedy, or temperature sampling after
// a repetition penalty and top-k / top-p filtering, as llama.cpp's default
// chain orders them (penalty, top-k, top-p, temperature). Seeded, so a run
// repeats exactly.
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
};

class Sampler {
 public:
  explicit Sampler(SamplerOptions o) : o_(o), rng_(o.seed) {}
  // `history`: the tokens so far (prompt and generated), for the penalty.
  int32_t sample(const float* logits, int64_t n_vocab, const std::vector<int32_t>& history);

 private:
  SamplerOptions o_;
  std::mt19937_64 rng_;
};

}  // namespace kiln
