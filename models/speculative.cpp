#include "models/speculative.h"

#include <algorithm>
#include <cmath>

#include "ir/error.h"

namespace kiln {

void check_draft_k(int64_t k) {
  if (k < 1 || k > kMaxDraftTokens)
    throw Error("--draft-k " + std::to_string(k) + ": expected 1 to " +
                std::to_string(kMaxDraftTokens));
}

void SpecCounts::add(int64_t guesses, int64_t accepted) {
  ++steps;
  draft_tokens += guesses;
  accepted_tokens += accepted;
}

double SpecCounts::acceptance_rate() const {
  return draft_tokens ? static_cast<double>(accepted_tokens) / static_cast<double>(draft_tokens)
                      : 0.0;
}

double SpecCounts::mean_accepted_length() const {
  return steps ? static_cast<double>(accepted_tokens + steps) / static_cast<double>(steps) : 0.0;
}

int32_t Draft::guess(Sampler& sampler, const float* logits, int64_t n_vocab,
                     const std::vector<int32_t>& seq) {
  TokenDist dist = sampler.distribution(logits, n_vocab, seq);
  const int32_t t = sampler.draw(dist);
  tokens.push_back(t);
  if (!sampler.greedy()) dists.push_back(std::move(dist));
  return t;
}

SamplerOptions draft_sampler_options(SamplerOptions target) {
  target.seed ^= 0x9e3779b97f4a7c15ull;  // the target's sampler draws too
  return target;
}

int64_t reusable_rows(const std::vector<int32_t>& cached, const std::vector<int32_t>& history) {
  const auto common = static_cast<int64_t>(
      std::mismatch(cached.begin(), cached.end(), history.begin(), history.end()).first -
      cached.begin());
  return std::min(common, static_cast<int64_t>(history.size()) - 1);
}

DraftModel::DraftModel(Llm& draft, const SamplerOptions& sampler)
    : draft_(draft), sampler_(draft_sampler_options(sampler)) {}

void DraftModel::prepare(int64_t n_prompt) {
  if (n_prompt < draft_.n_ctx()) draft_.prepare(n_prompt);
  draft_.prepare(1);
}

void DraftModel::start(const std::vector<int32_t>& prompt) {
  if (static_cast<int64_t>(prompt.size()) < draft_.n_ctx()) catch_up(prompt);
}

const std::vector<float>& DraftModel::catch_up(const std::vector<int32_t>& history) {
  const int64_t common = std::min(reusable_rows(cached_, history), draft_.pos());
  draft_.rewind(common);
  cached_ = history;
  return draft_.forward(std::vector<int32_t>(history.begin() + common, history.end()));
}

Draft DraftModel::propose(const std::vector<int32_t>& history, int64_t k) {
  Draft d;
  const auto n = static_cast<int64_t>(history.size());
  // Reading the history and k - 1 guesses must fit the draft's cache.
  k = std::min(k, draft_.n_ctx() - n + 1);
  if (k <= 0 || history.empty()) return d;
  const std::vector<float>* logits = &catch_up(history);
  std::vector<int32_t> seq = history;
  const int64_t V = draft_.config().n_vocab;
  for (int64_t i = 0; i < k; ++i) {
    const int32_t t = d.guess(sampler_, logits->data() + logits->size() - V, V, seq);
    seq.push_back(t);
    if (i + 1 == k) break;
    logits = &draft_.forward({t});
    cached_.push_back(t);
  }
  return d;
}

NgramDrafter::NgramDrafter(int64_t n_max) : n_max_(n_max) {
  if (n_max < 1 || n_max > 8)
    throw Error("--spec ngram:" + std::to_string(n_max) + ": the n-gram length is 1 to 8");
}

Draft NgramDrafter::propose(const std::vector<int32_t>& history, int64_t k) {
  Draft d;
  const auto n = static_cast<int64_t>(history.size());
  for (int64_t len = std::min(n_max_, n - 1); len >= 1 && k > 0; --len) {
    // The latest earlier occurrence of the last `len` tokens.
    for (int64_t at = n - len - 1; at >= 0; --at) {
      if (!std::equal(history.begin() + at, history.begin() + at + len, history.end() - len))
        continue;
      // What followed it; past the history's end the guesses themselves
      // continue a repeating pattern.
      for (int64_t i = 0; i < k; ++i) {
        const int64_t src = at + len + i;
        d.tokens.push_back(src < n ? history[src] : d.tokens[src - n]);
      }
      return d;
    }
  }
  return d;
}

int64_t parse_spec_ngram(const std::string& spec) {
  if (spec == "ngram") return 3;
  if (spec.rfind("ngram:", 0) == 0) {
    const std::string n = spec.substr(6);
    if (n.empty() || n.size() > 2 || !std::all_of(n.begin(), n.end(), ::isdigit))
      throw Error("--spec " + spec + ": expected ngram or ngram:N with N an integer 1 to 8");
    NgramDrafter check(std::stoll(n));  // names the range
    return std::stoll(n);
  }
  throw Error("--spec " + spec +
              ": unknown speculation (known: ngram, ngram:N; a draft model is --draft)");
}

Verdict verify_draft(Sampler& sampler, const float* rows, int64_t n_vocab,
                     const std::vector<int32_t>& history, const Draft& draft) {
  Verdict v;
  std::vector<int32_t> seq = history;
  const auto K = static_cast<int64_t>(draft.tokens.size());
  for (int64_t i = 0;; ++i) {
    const float* row = rows + i * n_vocab;
    TokenDist p = sampler.distribution(row, n_vocab, seq);
    if (i == K) {  // every guess kept: one more token from the last row
      v.tokens.push_back(sampler.draw(p));
      return v;
    }
    const int32_t guess = draft.tokens[static_cast<size_t>(i)];
    if (sampler.greedy()) {
      v.tokens.push_back(p.ids.front());
      if (p.ids.front() != guess) return v;
    } else {
      // Kept with probability min(1, p/q), so a kept token has p's
      // distribution where q overshoots, and the residual makes up the rest.
      const TokenDist* q = draft.dists.empty() ? nullptr : &draft.dists[static_cast<size_t>(i)];
      const double pg = p.prob(guess), qg = q ? q->prob(guess) : 1.0;
      if (qg > 0 && sampler.uniform() * qg < pg) {
        v.tokens.push_back(guess);
      } else {
        std::vector<double> qv(static_cast<size_t>(n_vocab));
        if (q) {
          const double qt = q->total();
          for (size_t j = 0; j < q->ids.size(); ++j)
            if (q->ids[j] < n_vocab) qv[q->ids[j]] = q->weights[j] / qt;
        } else if (guess < n_vocab) {
          qv[guess] = 1;
        }
        TokenDist r = p;
        const double pt = p.total();
        double rt = 0;
        for (size_t j = 0; j < r.ids.size(); ++j)
          rt += r.weights[j] = std::max(0.0, p.weights[j] / pt - qv[r.ids[j]]);
        v.tokens.push_back(sampler.draw(rt > 0 ? r : p));
        return v;
      }
    }
    ++v.accepted;
    seq.push_back(guess);
  }
}

void check_draft_vocab(const Tokenizer& target, const Tokenizer& draft) {
  const Vocab &t = target.vocab(), &d = draft.vocab();
  auto fail = [](const std::string& what) {
    throw Error("--draft: the draft model's vocabulary is not the target's: " + what);
  };
  if (t.size() != d.size())
    fail("the draft has " + std::to_string(d.size()) + " tokens, the target " +
         std::to_string(t.size()));
  for (int32_t i = 0; i < t.size(); ++i)
    if (t.tokens[i] != d.tokens[i])
      fail("token " + std::to_string(i) + " is '" + d.tokens[i] + "' in the draft, '" +
           t.tokens[i] + "' in the target");
  if (t.bos != d.bos)
    fail("BOS is token " + std::to_string(d.bos) + " in the draft, " + std::to_string(t.bos) +
         " in the target");
  if (t.eos != d.eos)
    fail("EOS is token " + std::to_string(d.eos) + " in the draft, " + std::to_string(t.eos) +
         " in the target");
}

std::string draft_size_warning(const Llm& target, const Llm& draft) {
  auto bytes = [](const Llm& m) {
    uint64_t b = 0;
    for (const auto& t : m.file().tensors()) b += t.nbytes;
    return b;
  };
  const uint64_t tb = bytes(target), db = bytes(draft);
  if (db < tb) return "";
  return "warning: --draft: the draft model's weights (" + std::to_string(db >> 20) +
         " MiB) are not smaller than the target's (" + std::to_string(tb >> 20) +
         " MiB): each guess costs about what it can save";
}

void Acceptance::record(int64_t k, int64_t accepted) {
  constexpr double kDecay = 0.95;
  kept_ = kept_ * kDecay + static_cast<double>(accepted);
  missed_ = missed_ * kDecay + (accepted < k ? 1.0 : 0.0);
  // Probes that keep nothing come ever less often.
  probe_every_ = accepted > 0 ? 16 : std::min<int64_t>(probe_every_ * 2, 256);
}

double Acceptance::rate() const { return kept_ + missed_ > 0 ? kept_ / (kept_ + missed_) : 0.8; }

double Acceptance::expected_tokens(int64_t k) const {
  const double a = std::min(rate(), 0.999);
  return (1 - std::pow(a, static_cast<double>(k + 1))) / (1 - a);
}

bool Acceptance::probe_due() {
  if (++since_probe_ < probe_every_) return false;
  since_probe_ = 0;
  return true;
}

SpecPlanner::SpecPlanner(int64_t k_max, bool adaptive) : k_max_(k_max), adaptive_(adaptive) {}

void SpecPlanner::record_step(int64_t tokens, double ms) {
  constexpr double kDecay = 0.98;  // about the last 50 steps
  const auto x = static_cast<double>(tokens);
  n_ = n_ * kDecay + 1;
  sx_ = sx_ * kDecay + x;
  sy_ = sy_ * kDecay + ms;
  sxx_ = sxx_ * kDecay + x * x;
  sxy_ = sxy_ * kDecay + x * ms;
}

void SpecPlanner::record_draft(int64_t guesses, double ms) {
  draft_ms_ += ms;
  draft_n_ += static_cast<double>(guesses);
}

bool SpecPlanner::known() const {
  // Two token counts timed: the points do not all share one x.
  return n_ > 0 && n_ * sxx_ - sx_ * sx_ > 1e-6 * n_ * n_;
}

double SpecPlanner::step_ms(int64_t tokens) const {
  if (n_ == 0) return 1;
  if (!known()) return sy_ / n_;
  const double b = std::max(0.0, (n_ * sxy_ - sx_ * sy_) / (n_ * sxx_ - sx_ * sx_));
  const double a = (sy_ - b * sx_) / n_;
  return std::max(1e-6, a + b * static_cast<double>(tokens));
}

double SpecPlanner::predicted_speedup(const Acceptance& a, int64_t k) const {
  const double per_guess = draft_n_ > 0 ? draft_ms_ / draft_n_ : 0;
  const double cost = static_cast<double>(k) * per_guess + step_ms(k + 1);
  return a.expected_tokens(k) * step_ms(1) / cost;
}

std::vector<int64_t> SpecPlanner::plan(const std::vector<Acceptance*>& seqs,
                                       const std::vector<int64_t>& room, int64_t other_tokens) {
  std::vector<int64_t> k(seqs.size());
  // Fixed: k_max. Before the line is known: one guess each, the cheapest
  // step that times a second token count.
  for (size_t i = 0; i < seqs.size(); ++i)
    if (!adaptive_ || !known()) k[i] = std::min(adaptive_ ? 1 : k_max_, room[i]);
  if (!adaptive_ || !known()) return k;
  const double per_guess = draft_n_ > 0 ? draft_ms_ / draft_n_ : 0;
  const double c1 = step_ms(2) - step_ms(1);
  auto tokens_in_step = static_cast<int64_t>(seqs.size()) + other_tokens;
  double ms = step_ms(tokens_in_step), made = static_cast<double>(seqs.size());
  for (;;) {
    // The likeliest kept next guess among the sequences with room.
    size_t best = seqs.size();
    double gain = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (k[i] >= std::min(k_max_, room[i])) continue;
      const double g = seqs[i]->expected_tokens(k[i] + 1) - seqs[i]->expected_tokens(k[i]);
      if (g > gain) best = i, gain = g;
    }
    // It pays when its tokens per ms beat the step's, by more than noise.
    if (best == seqs.size() || gain * ms <= 1.02 * made * (c1 + per_guess)) break;
    ++k[best];
    ms += c1 + per_guess;
    made += gain;
  }
  // A sequence given nothing still guesses now and then, so that a rising
  // acceptance is seen: where a guess kept for sure would pay.
  const bool could_pay = ms > 1.02 * made * (c1 + per_guess);
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (k[i] == 0 && room[i] > 0 && could_pay && seqs[i]->probe_due()) k[i] = 1;
    seqs[i]->guessed(k[i] > 0);
  }
  return k;
}

}  // namespace kiln
