#include "models/batch_scheduler.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "ir/error.h"
#include "models/grammar/matcher.h"
#include "models/sampler.h"

namespace kiln {

using Clock = std::chrono::steady_clock;

struct BatchScheduler::Seq {
  Seq(SeqRequest r, uint64_t at, const Tokenizer& tok, int64_t choice = 0)
      : req(std::move(r)),
        arrival(at),
        choice(choice),
        tokens(req.prompt),
        sampler(seeded(req.options.sampler, choice)),
        text(tok, req.options.stop) {
    result.prompt = req.prompt;
    if (req.options.grammar && req.options.grammar_trigger.empty())
      matcher.emplace(req.options.grammar);
  }
  static SamplerOptions seeded(SamplerOptions o, int64_t choice) {
    o.seed += static_cast<uint64_t>(choice);
    return o;
  }
  // Running slots it takes: its choices until they fork.
  int64_t slots() const { return forked ? 1 : req.n; }
  // Whether prompt tokens are still to be scored.
  bool scoring() const {
    return req.options.prompt_logprobs && result.prompt_logprobs.size() + 1 < req.prompt.size();
  }
  SeqRequest req;
  uint64_t arrival;
  int64_t choice;
  bool forked = false;          // its other choices made (or it has none)
  std::vector<int32_t> tokens;  // the prompt, then the tokens generated
  int64_t computed = 0;         // of tokens, the rows in the cache
  KvPagePool::SeqId kv = -1;    // its pages; -1 while waiting
  bool admitted = false, done = false;
  Sampler sampler;
  StopText text;
  // Its grammar's parse (from the start, or once the trigger showed in
  // `reply`, the generated text with control tokens' text), and the mask.
  std::optional<GrammarMatcher> matcher;
  std::string reply;
  std::vector<uint32_t> mask;
  GenerationResult result;
  Clock::time_point start = Clock::now(), last{};
};

namespace {
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

BatchScheduler::BatchScheduler(Llm& model, SchedulerOptions o)
    : model_(model),
      o_(o),
      pool_(model.kv_pages() > 0 ? model.kv_pages() : 1, std::max<int64_t>(model.kv_page(), 1)),
      cache_(pool_) {
  if (model.kv_pages() == 0)
    throw Error("batch scheduler: the model's KV cache is not a serving pool (kv_pages)");
  if (o_.max_batch < 1 || o_.token_budget < o_.max_batch)
    throw Error("batch scheduler: max_batch " + std::to_string(o_.max_batch) +
                " and a token budget of " + std::to_string(o_.token_budget) +
                " (need max_batch >= 1 and a budget of at least max_batch tokens)");
}

BatchScheduler::~BatchScheduler() {
  for (auto& s : embeds_) finish(*s, "", "the server is stopping");
  for (auto& s : running_) finish(*s, "", "the server is stopping");
  for (auto& s : waiting_) finish(*s, "", "the server is stopping");
}

void BatchScheduler::add(SeqRequest r) {
  auto s = std::make_unique<Seq>(std::move(r), arrivals_++, model_.tokenizer());
  const int64_t n = static_cast<int64_t>(s->tokens.size());
  stats_.prompt_tokens += n;
  if (n == 0) return finish(*s, "", "the prompt has no tokens");
  if (n > model_.n_ctx())
    return finish(*s, "",
                  "the prompt's " + std::to_string(n) + " tokens exceed the context of " +
                      std::to_string(model_.n_ctx()));
  if ((n + pool_.page() - 1) / pool_.page() > pool_.n_pages())
    return finish(*s, "",
                  "the prompt's " + std::to_string(n) + " tokens exceed the KV pool of " +
                      std::to_string(pool_.n_pages()) + " pages of " +
                      std::to_string(pool_.page()));
  if (s->req.n < 1) return finish(*s, "", "n must be at least 1");
  if (s->req.options.embed) {
    if (s->req.n != 1) return finish(*s, "", "an embedding has one choice");
    embeds_.push_back(std::move(s));
    return;
  }
  s->forked = s->req.n == 1;
  if (s->req.options.n_predict <= 0 && !s->scoring()) return finish(*s, "length");
  waiting_.push_back(std::move(s));
}

SchedulerStats BatchScheduler::stats() const {
  SchedulerStats st = stats_;
  st.waiting = static_cast<int64_t>(waiting_.size());
  st.running = static_cast<int64_t>(running_.size());
  st.pages = pool_.n_pages();
  st.pages_used = pool_.n_pages() - pool_.free_pages();
  st.pages_cached = cache_.pages();
  return st;
}

void BatchScheduler::keep_pages(Seq& s) {
  if (!o_.prefix_cache || s.kv < 0) return;
  const std::vector<int32_t> rows(s.tokens.begin(), s.tokens.begin() + s.computed);
  cache_.insert(rows, pool_.table(s.kv));
}

void BatchScheduler::finish(Seq& s, const std::string& reason, const std::string& error) {
  if (s.done) return;
  s.done = true;
  if (s.kv >= 0) {
    if (error.empty()) keep_pages(s);
    pool_.free(s.kv);
    s.kv = -1;
  }
  if (error.empty()) {
    const std::string rest = s.text.flush();
    s.result.text += rest;
    if (!rest.empty() && s.req.on_text) s.req.on_text(s.choice, rest, s.result);
  }
  s.result.stop_reason = reason;
  if (s.req.on_done) s.req.on_done(s.choice, s.result, error);
  // Choices not forked yet (their prompt unread: cancelled, failed, or
  // nothing to generate) end as this one does.
  for (int64_t c = 1; !s.forked && c < s.req.n; ++c)
    if (s.req.on_done) s.req.on_done(c, s.result, error);
  s.forked = true;
}

void BatchScheduler::preempt(Seq& s) {
  keep_pages(s);  // a recompute may find them still cached
  pool_.free(s.kv);
  s.kv = -1;
  s.computed = 0;
  ++stats_.preemptions;
  auto it = std::find_if(running_.begin(), running_.end(),
                         [&](const std::unique_ptr<Seq>& p) { return p.get() == &s; });
  std::unique_ptr<Seq> owned = std::move(*it);
  running_.erase(it);
  // Back among the waiting in arrival order: ahead of everyone who came later.
  auto at = std::find_if(waiting_.begin(), waiting_.end(), [&](const std::unique_ptr<Seq>& w) {
    return w->arrival > owned->arrival;
  });
  waiting_.insert(at, std::move(owned));
}

void BatchScheduler::append(Seq& s, int64_t rows) {
  const std::vector<KvPagePool::PageCopy> copies = pool_.append(s.kv, rows);
  if (!copies.empty()) model_.copy_kv_pages(copies);
}

bool BatchScheduler::reserve(Seq& s, int64_t rows, const std::vector<Seq*>& scheduled) {
  const int64_t need = pool_.pages_needed(s.kv, rows);
  while (pool_.free_pages() < need) {
    if (o_.prefix_cache && cache_.evict(need)) break;
    // The latest arrival not yet in this step gives its pages back.
    Seq* victim = nullptr;
    for (auto it = running_.rbegin(); it != running_.rend() && !victim; ++it)
      if (it->get() != &s &&
          std::find(scheduled.begin(), scheduled.end(), it->get()) == scheduled.end())
        victim = it->get();
    if (!victim) {
      preempt(s);
      return false;
    }
    preempt(*victim);
  }
  append(s, rows);
  return true;
}

bool BatchScheduler::admit(Seq& s, int64_t budget) {
  const int64_t page = pool_.page(), n = static_cast<int64_t>(s.tokens.size());
  std::vector<int32_t> shared;
  // Cached pages, one token short of the whole: the last one's logits are
  // computed. A prompt being scored is read from its start.
  if (o_.prefix_cache && !s.scoring()) shared = cache_.match(s.tokens, (n - 1) / page);
  s.kv = pool_.create(shared);
  s.computed = static_cast<int64_t>(shared.size()) * page;
  const int64_t rows = std::min(n - s.computed, budget);
  const int64_t need = pool_.pages_needed(s.kv, rows);
  if (pool_.free_pages() < need && !(o_.prefix_cache && cache_.evict(need))) {
    pool_.free(s.kv);
    s.kv = -1;
    s.computed = 0;
    return false;
  }
  append(s, rows);
  if (!s.admitted) stats_.cached_prompt_tokens += s.computed;
  s.admitted = true;
  return true;
}

void BatchScheduler::step() {
  auto cancelled = [](const Seq& s) {
    return s.req.options.cancelled && s.req.options.cancelled();
  };
  for (auto& s : running_)
    if (cancelled(*s)) finish(*s, "cancelled");
  for (auto& s : waiting_)
    if (cancelled(*s)) finish(*s, "cancelled");
  for (auto& s : embeds_)
    if (cancelled(*s)) finish(*s, "cancelled");
  auto sweep = [](auto& list) {
    list.erase(std::remove_if(list.begin(), list.end(), [](const auto& s) { return s->done; }),
               list.end());
  };
  sweep(running_);
  sweep(waiting_);
  sweep(embeds_);
  embed_step();

  // Decodes first, then the chunks of prompts being read, then newcomers,
  // each in arrival order, up to the token budget.
  std::vector<Seq*> batch;
  std::vector<int64_t> rows;
  int64_t budget = o_.token_budget;
  for (bool decodes : {true, false}) {
    std::vector<Seq*> order;
    for (auto& s : running_) order.push_back(s.get());
    for (Seq* s : order) {
      if (s->kv < 0 || std::find(batch.begin(), batch.end(), s) != batch.end()) continue;
      const int64_t left = static_cast<int64_t>(s->tokens.size()) - s->computed;
      if ((left == 1) != decodes || budget == 0) continue;
      const int64_t n = std::min(left, budget);
      if (!reserve(*s, n, batch)) continue;
      batch.push_back(s);
      rows.push_back(n);
      budget -= n;
    }
  }
  auto slots = [&] {
    int64_t n = 0;
    for (auto& r : running_) n += r->slots();
    return n;
  };
  while (!waiting_.empty() && budget > 0 &&
         (running_.empty() || slots() + waiting_.front()->slots() <= o_.max_batch)) {
    Seq& w = *waiting_.front();
    if ((static_cast<int64_t>(w.tokens.size()) + pool_.page() - 1) / pool_.page() >
        pool_.n_pages()) {
      finish(w, "length");  // preempted, then grown past what the whole pool holds
      waiting_.pop_front();
      continue;
    }
    if (!admit(w, budget)) break;
    const int64_t n = pool_.length(w.kv) - w.computed;
    std::unique_ptr<Seq> owned = std::move(waiting_.front());
    waiting_.pop_front();
    auto at = std::find_if(running_.begin(), running_.end(), [&](const std::unique_ptr<Seq>& r) {
      return r->arrival > owned->arrival;
    });
    running_.insert(at, std::move(owned));
    batch.push_back(&w);
    rows.push_back(n);
    budget -= n;
  }
  if (batch.empty()) return;

  std::vector<Llm::SeqChunk> chunks;
  for (size_t i = 0; i < batch.size(); ++i) {
    Seq& s = *batch[i];
    auto first = s.tokens.begin() + s.computed;
    chunks.push_back(
        {std::vector<int32_t>(first, first + rows[i]), s.computed, pool_.table(s.kv), s.scoring()});
  }
  ++stats_.steps;
  const std::vector<float>* logits = nullptr;
  try {
    logits = &model_.forward_batch(chunks);
  } catch (const Error& e) {
    for (Seq* s : batch) finish(*s, "", e.what());
    sweep(running_);
    return;
  }
  const int64_t V = model_.config().n_vocab, page = pool_.page();
  const Clock::time_point now = Clock::now();
  int64_t out = 0;  // the chunk's first row of logits
  for (size_t i = 0; i < batch.size(); ++i) {
    Seq& s = *batch[i];
    const float* row = logits->data() + out * V;
    const int64_t before = s.computed;
    out += chunks[i].all_logits ? rows[i] : 1;
    const float* last = logits->data() + (out - 1) * V;
    if (chunks[i].all_logits) score_prompt(s, before, rows[i], row);
    s.computed += rows[i];
    if (s.computed / page > before / page) keep_pages(s);              // a page filled
    if (s.computed < static_cast<int64_t>(s.tokens.size())) continue;  // mid-prompt
    if (s.result.generated.empty())
      s.result.prefill_ms = ms_between(s.start, now);
    else
      s.result.token_ms.push_back(ms_between(s.last, now));
    s.last = now;
    for (Seq* c : fork_choices(s)) {
      if (c != &s) c->last = now;
      if (s.req.options.n_predict <= 0)
        finish(*c, "length");  // scored only
      else
        next_token(*c, last);
    }
  }
  sweep(running_);
}

void BatchScheduler::embed_step() {
  std::vector<std::unique_ptr<Seq>> batch;
  std::vector<Llm::SeqChunk> chunks;
  int64_t tokens = 0;
  while (!embeds_.empty()) {
    Seq& s = *embeds_.front();
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (!batch.empty() && tokens + n > o_.token_budget) break;
    // Read from the start: every position's hidden state is pooled.
    s.kv = pool_.create();
    const int64_t need = pool_.pages_needed(s.kv, n);
    if (pool_.free_pages() < need && !(o_.prefix_cache && cache_.evict(need))) {
      pool_.free(s.kv);  // waits for pages the running sequences give back
      s.kv = -1;
      break;
    }
    append(s, n);
    chunks.push_back({s.tokens, 0, pool_.table(s.kv), true});
    batch.push_back(std::move(embeds_.front()));
    embeds_.pop_front();
    tokens += n;
  }
  if (batch.empty()) return;
  ++stats_.steps;
  const std::vector<float>* rows = nullptr;
  try {
    rows = &model_.forward_batch(chunks, false, /*hidden=*/true);
  } catch (const Error& e) {
    for (auto& s : batch) finish(*s, "", e.what());
    return;
  }
  const int64_t E = model_.config().n_embd;
  const Clock::time_point now = Clock::now();
  const float* row = rows->data();
  for (auto& s : batch) {
    const int64_t n = static_cast<int64_t>(s->tokens.size());
    std::vector<double> sum(static_cast<size_t>(E));
    switch (model_.config().pooling) {
      case ModelConfig::Pooling::mean:
        for (int64_t t = 0; t < n; ++t)
          for (int64_t e = 0; e < E; ++e) sum[static_cast<size_t>(e)] += row[t * E + e] / double(n);
        break;
      case ModelConfig::Pooling::cls: std::copy(row, row + E, sum.begin()); break;
      case ModelConfig::Pooling::last:
        std::copy(row + (n - 1) * E, row + n * E, sum.begin());
        break;
    }
    s->result.embedding.assign(sum.begin(), sum.end());
    s->result.prefill_ms = ms_between(s->start, now);
    s->computed = n;
    row += n * E;
    finish(*s, "length");
  }
}

void BatchScheduler::score_prompt(Seq& s, int64_t before, int64_t rows, const float* logits) {
  const int64_t V = model_.config().n_vocab, n = static_cast<int64_t>(s.req.prompt.size());
  // Row j holds the logits after position before + j: they score the token
  // at before + j + 1 (the prompt's first token has no score).
  for (int64_t j = 0; j < rows; ++j) {
    const int64_t target = before + j + 1;
    if (target >= n) break;
    if (target != static_cast<int64_t>(s.result.prompt_logprobs.size()) + 1) continue;
    s.result.prompt_logprobs.push_back(token_logprob(logits + j * V, V,
                                                     s.req.prompt[static_cast<size_t>(target)],
                                                     std::max<int64_t>(s.req.options.logprobs, 0)));
  }
}

std::vector<BatchScheduler::Seq*> BatchScheduler::fork_choices(Seq& s) {
  std::vector<Seq*> all = {&s};
  if (s.forked) return all;
  s.forked = true;
  auto at = std::find_if(running_.begin(), running_.end(),
                         [&](const std::unique_ptr<Seq>& r) { return r.get() == &s; });
  for (int64_t c = 1; c < s.req.n; ++c) {
    auto other = std::make_unique<Seq>(s.req, s.arrival, model_.tokenizer(), c);
    other->forked = other->admitted = true;
    other->kv = pool_.fork(s.kv);
    other->computed = s.computed;
    other->result = s.result;
    other->start = s.start;
    all.push_back(other.get());
    at = running_.insert(at + 1, std::move(other));
  }
  return all;
}

void BatchScheduler::next_token(Seq& s, const float* logits) {
  const int64_t V = model_.config().n_vocab;
  const GenerationOptions& o = s.req.options;
  if (s.matcher) s.matcher->fill_mask(&s.mask);
  const int32_t next = s.sampler.sample(logits, V, s.tokens, s.matcher ? s.mask.data() : nullptr);
  if (o.logprobs >= 0) s.result.logprobs.push_back(token_logprob(logits, V, next, o.logprobs));
  if (o.stop_at_eos && next == model_.tokenizer().eos_id()) {
    s.result.logprobs.resize(s.result.generated.size());  // the end is no token of the text
    return finish(s, "eos");
  }
  if (s.matcher && !s.matcher->accept(next))
    return finish(s, "",
                  "grammar: token " + std::to_string(next) + " was sampled outside its mask");
  if (!s.matcher && o.grammar) {
    // Waiting for the trigger: the grammar holds from where it shows.
    s.reply += model_.tokenizer().token_to_piece(next, true);
    if (const size_t at = s.reply.find(o.grammar_trigger); at != std::string::npos) {
      s.matcher.emplace(o.grammar);
      if (!s.matcher->accept_bytes(std::string_view(s.reply).substr(at)))
        return finish(s, "", "grammar: the text after its trigger does not begin a match");
    }
  }
  s.tokens.push_back(next);
  s.result.generated.push_back(next);
  ++stats_.generated_tokens;
  const std::string piece = s.text.push(next);
  s.result.text += piece;
  if (!piece.empty() && s.req.on_text) s.req.on_text(s.choice, piece, s.result);
  if (s.text.stopped())
    finish(s, "stop string");
  else if (s.matcher && s.matcher->is_done())
    finish(s, "eos");  // the grammar is whole: only its end can follow
  else if (static_cast<int64_t>(s.result.generated.size()) >= o.n_predict ||
           s.computed >= model_.n_ctx())
    finish(s, "length");
}

}  // namespace kiln
