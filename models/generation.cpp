#include "models/generation.h"

#include <chrono>

#include "ir/error.h"

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
  auto keep = [&](const std::vector<float>& l) {
    if (o.all_logits) r.logits.insert(r.logits.end(), l.begin(), l.end());
  };
  if (o.cached < 0 || o.cached >= static_cast<int64_t>(prompt.size()) || model.pos() != o.cached)
    throw Error("generate: " + std::to_string(o.cached) + " cached prompt tokens of " +
                std::to_string(prompt.size()) + ", the model's cache holding " +
                std::to_string(model.pos()));
  const std::vector<int32_t> fresh(prompt.begin() + o.cached, prompt.end());
  // Plans are recorded (kernels compiled) before the clock starts.
  model.prepare(static_cast<int64_t>(fresh.size()), o.all_logits);
  if (o.n_predict > 1) model.prepare(1, o.all_logits);
  auto t0 = std::chrono::steady_clock::now();
  const std::vector<float>* logits = &model.forward(fresh, o.all_logits);
  r.prefill_ms = ms_since(t0);
  r.launches_prefill = model.last_kernel_launches();
  keep(*logits);
  StopText text(model.tokenizer(), o.stop);
  r.stop_reason = "length";
  for (int64_t i = 0; i < o.n_predict; ++i) {
    const float* last = logits->data() + logits->size() - V;
    int32_t next = sampler.sample(last, V, history);
    if (o.stop_at_eos && next == model.tokenizer().eos_id()) {
      r.stop_reason = "eos";
      break;
    }
    r.generated.push_back(next);
    history.push_back(next);
    const std::string piece = text.push(next);
    if (on_text && !piece.empty()) on_text(piece);
    r.text += piece;
    if (text.stopped()) {
      r.stop_reason = "stop string";
      break;
    }
    if (o.cancelled && o.cancelled()) {
      r.stop_reason = "cancelled";
      break;
    }
    if (i + 1 == o.n_predict || model.pos() >= model.n_ctx()) break;
    auto t1 = std::chrono::steady_clock::now();
    logits = &model.forward({next}, o.all_logits);
    r.token_ms.push_back(ms_since(t1));
    r.launches_per_token = model.last_kernel_launches();
    keep(*logits);
  }
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
