#include "models/generation.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "ir/error.h"
#include "models/speculative.h"

namespace kiln {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

GenerationResult generate(Llm& model, const std::vector<int32_t>& prompt,
                          const GenerationOptions& o,
                          const std::function<void(const std::string&)>& on_text) {
  if (prompt.empty()) throw Error("generate: the prompt has no tokens");
  GenerationResult r;
  r.prompt = prompt;
  const int64_t V = model.config().n_vocab;
  Sampler sampler(o.sampler);
  std::vector<int32_t> history = prompt;
  auto keep = [&](const float* row, int64_t rows) {
    if (o.all_logits) r.logits.insert(r.logits.end(), row, row + rows * V);
  };
  if (o.cached < 0 || o.cached >= static_cast<int64_t>(prompt.size()) || model.pos() != o.cached)
    throw Error("generate: " + std::to_string(o.cached) + " cached prompt tokens of " +
                std::to_string(prompt.size()) + ", the model's cache holding " +
                std::to_string(model.pos()));
  std::optional<SpecPlanner> planner;
  Acceptance acceptance;
  int64_t plain_steps = 0;
  if (o.drafter) {
    check_draft_k(o.draft_k);
    planner.emplace(o.draft_k, !o.draft_k_fixed);
    o.drafter->prepare(static_cast<int64_t>(prompt.size()));
  }
  const std::vector<int32_t> fresh(prompt.begin() + o.cached, prompt.end());
  // Plans are recorded (kernels compiled) before the clock starts.
  model.prepare(static_cast<int64_t>(fresh.size()), o.all_logits);
  if (o.n_predict > 1) model.prepare(1, o.all_logits);
  if (o.drafter && o.n_predict > 1)  // the verify forwards, of every K
    for (int64_t n = 2; n <= o.draft_k + 1; ++n) model.prepare(n, true);
  auto t0 = std::chrono::steady_clock::now();
  const std::vector<float>* logits = &model.forward(fresh, o.all_logits);
  if (o.drafter) o.drafter->start(prompt);
  r.prefill_ms = ms_since(t0);
  r.launches_prefill = model.last_kernel_launches();
  keep(logits->data(), static_cast<int64_t>(logits->size()) / V);
  StopText text(model.tokenizer(), o.stop);
  r.stop_reason = "length";
  // Emits a sampled token; false when the generation ends with it.
  auto emit = [&](int32_t next) {
    if (o.stop_at_eos && model.tokenizer().is_eog(next)) {
      r.stop_reason = "eos";
      return false;
    }
    r.generated.push_back(next);
    history.push_back(next);
    const std::string piece = text.push(next);
    if (on_text && !piece.empty()) on_text(piece);
    r.text += piece;
    if (text.stopped()) {
      r.stop_reason = "stop string";
      return false;
    }
    if (o.cancelled && o.cancelled()) {
      r.stop_reason = "cancelled";
      return false;
    }
    return true;
  };
  bool going =
      o.n_predict > 0 && emit(sampler.sample(logits->data() + logits->size() - V, V, history));
  while (going && static_cast<int64_t>(r.generated.size()) < o.n_predict &&
         model.pos() < model.n_ctx()) {
    const int32_t last = history.back();
    Draft draft;
    double draft_ms = 0;
    // The first two steps of an adaptive run are plain: the cost line's
    // baseline.
    if (o.drafter && (o.draft_k_fixed || plain_steps >= 2)) {
      // Room for every guess and the token after them, in the output and the cache.
      const int64_t room = std::min(o.n_predict - static_cast<int64_t>(r.generated.size()) - 1,
                                    model.n_ctx() - model.pos() - 1);
      const int64_t k = planner->plan({&acceptance}, {room})[0];
      if (k > 0) {
        auto td = std::chrono::steady_clock::now();
        draft = o.drafter->propose(history, k);
        draft_ms = ms_since(td);
        if (!draft.tokens.empty())
          planner->record_draft(static_cast<int64_t>(draft.tokens.size()), draft_ms);
      }
    }
    if (draft.tokens.empty()) {  // a plain decode step
      auto t1 = std::chrono::steady_clock::now();
      logits = &model.forward({last}, o.all_logits);
      const double step_ms = ms_since(t1);
      r.token_ms.push_back(step_ms + draft_ms);
      r.launches_per_token = model.last_kernel_launches();
      if (planner) planner->record_step(1, step_ms);
      ++plain_steps;
      keep(logits->data(), 1);
      going = emit(sampler.sample(logits->data(), V, history));
      continue;
    }
    // One forward reads the last token and the guesses; the cache then
    // keeps the last token and the guesses accepted.
    std::vector<int32_t> batch = {last};
    batch.insert(batch.end(), draft.tokens.begin(), draft.tokens.end());
    const int64_t pos0 = model.pos();
    auto t1 = std::chrono::steady_clock::now();
    const std::vector<float>& rows = model.forward(batch, true);
    const Verdict v = verify_draft(sampler, rows.data(), V, history, draft);
    const double verify_ms = ms_since(t1);
    model.rewind(pos0 + 1 + v.accepted);
    const auto k = static_cast<int64_t>(draft.tokens.size());
    acceptance.record(k, v.accepted);
    planner->record_step(k + 1, verify_ms);
    r.spec.add(k, v.accepted);
    r.draft_ms += draft_ms;
    r.verify_ms += verify_ms;
    r.launches_per_token = model.last_kernel_launches();
    for (size_t i = 0; i < v.tokens.size() && going; ++i) {
      r.token_ms.push_back((draft_ms + verify_ms) / static_cast<double>(v.tokens.size()));
      keep(rows.data() + i * V, 1);
      going = emit(v.tokens[i]);
    }
  }
  if (planner && r.spec.steps > 0)
    r.spec_predicted_speedup = planner->predicted_speedup(
        acceptance, (r.spec.draft_tokens + r.spec.steps / 2) / r.spec.steps);
  const std::string rest = text.flush();
  if (on_text && !rest.empty()) on_text(rest);
  r.text += rest;
  return r;
}

std::string StopText::push(int32_t token) {
  if (stopped_) return "";
  pending_ += tok_.token_to_piece(token);
  for (const auto& s : stop_) {
    size_t at = pending_.find(s);
    if (!s.empty() && at != std::string::npos) {
      pending_.resize(at);
      stopped_ = true;
    }
  }
  size_t safe = pending_.size();
  if (!stopped_)
    for (const auto& s : stop_)
      for (size_t n = std::min(s.size() - 1, pending_.size()); n > 0; --n)
        if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
          safe = std::min(safe, pending_.size() - n);
          break;
        }
  std::string out = pending_.substr(0, safe);
  pending_.erase(0, safe);
  if (stopped_) pending_.clear();
  return out;
}

std::string StopText::flush() {
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace kiln
