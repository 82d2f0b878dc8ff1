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
  // Decoded text is emitted once it can no longer be the start of a stop
  // string, so a stop string never reaches the stream.
  std::string pending;
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
    pending += model.tokenizer().token_to_piece(next);
    bool stopped = false;
    for (const auto& s : o.stop) {
      size_t at = pending.find(s);
      if (!s.empty() && at != std::string::npos) {
        pending.resize(at);
        stopped = true;
      }
    }
    size_t safe = pending.size();
    if (!stopped)
      for (const auto& s : o.stop)
        for (size_t n = std::min(s.size() - 1, pending.size()); n > 0; --n)
          if (pending.compare(pending.size() - n, n, s, 0, n) == 0) {
            safe = std::min(safe, pending.size() - n);
            break;
          }
    if (on_text && safe) on_text(pending.substr(0, safe));
    r.text += pending.substr(0, safe);
    pending.erase(0, safe);
    if (stopped) {
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
  if (on_text && !pending.empty()) on_text(pending);
  r.text += pending;
  return r;
}

}  // namespace kiln
