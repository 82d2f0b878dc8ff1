// Log-probabilities of tokens under a row of logits, as OpenAI's
// `logprobs` report them: the chosen token's and the likeliest
// alternatives'.
//
// Why a unit: a server scores the prompt (`echo`) and every generated
// token with the same rule. They are the model's own distribution (a
// log-softmax of the raw logits, before temperature, penalties and top-k/p),
// as vLLM reports by default, so a score does not depend on how the text
// was sampled; an evaluation harness compares them across engines.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace kiln {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  // The likeliest tokens, most likely first (ties: the lower id first).
  std::vector<std::pair<int32_t, float>> top;
};

// `token`'s log-probability under `logits` [n_vocab], and the top_n
// likeliest tokens' (none for top_n <= 0). Computed in double: a 128k
// vocabulary's sum of exponentials keeps its digits.
TokenLogprob token_logprob(const float* logits, int64_t n_vocab, int32_t token, int64_t top_n);

}  // namespace kiln
