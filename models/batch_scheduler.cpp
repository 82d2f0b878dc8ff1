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
  // Speculative decoding: how often its guesses are kept, and with a draft
  // model its sequence in the draft's pool, the tokens it holds, and the
  // draft's sampler.
  Acceptance acceptance;
  KvPagePool::SeqId draft_kv = -1;
  std::vector<int32_t> draft_cached;
  std::optional<Sampler> draft_sampler;
  GenerationResult result;
  Clock::time_point start = Clock::now(), last{};
};

namespace {
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

namespace {
const std::pair<SchedulerPolicy, const char*> kPolicies[] = {
    {SchedulerPolicy::decode_first, "decode-first"},
    {SchedulerPolicy::prefill_first, "prefill-first"},
    {SchedulerPolicy::round_robin, "round-robin"},
    {SchedulerPolicy::static_batch, "static"}};
}  // namespace

SchedulerPolicy parse_scheduler_policy(const std::string& name) {
  std::string known;
  for (const auto& [p, n] : kPolicies) {
    if (name == n) return p;
    known += known.empty() ? n : std::string(", ") + n;
  }
  throw Error("unknown scheduler policy '" + name + "' (known: " + known + ")");
}

std::string scheduler_policy_name(SchedulerPolicy p) {
  for (const auto& [q, n] : kPolicies)
    if (p == q) return n;
  return "?";
}

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
  if (o_.ngram > 0 && o_.draft)
    throw Error("batch scheduler: prompt lookup or a draft model, not both");
  if (o_.ngram > 0 || o_.draft) {
    check_draft_k(o_.draft_k);
    planner_.emplace(o_.draft_k, !o_.draft_k_fixed);
  }
  if (o_.ngram > 0) ngram_.emplace(o_.ngram);
  if (o_.draft) {
    if (o_.draft->kv_pages() == 0)
      throw Error("batch scheduler: the draft model's KV cache is not a serving pool (kv_pages)");
    if (o_.draft->n_ctx() < model_.n_ctx())
      throw Error("batch scheduler: the draft model's context (" +
                  std::to_string(o_.draft->n_ctx()) + ") is shorter than the target's (" +
                  std::to_string(model_.n_ctx()) + ")");
    check_draft_vocab(model_.tokenizer(), o_.draft->tokenizer());
    draft_pool_.emplace(o_.draft->kv_pages(), o_.draft->kv_page());
  }
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

void BatchScheduler::free_draft(Seq& s) {
  if (s.draft_kv < 0) return;
  draft_pool_->free(s.draft_kv);
  s.draft_kv = -1;
  s.draft_cached.clear();
}

void BatchScheduler::finish(Seq& s, const std::string& reason, const std::string& error) {
  if (s.done) return;
  s.done = true;
  free_draft(s);
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
  free_draft(s);
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
  if (!s.admitted) {
    stats_.cached_prompt_tokens += s.computed;
    s.result.queue_ms = ms_between(s.start, Clock::now());
  }
  s.admitted = true;
  return true;
}

void BatchScheduler::trace(Trace* t) {
  trace_ = t;
  model_.trace(t);
  if (o_.draft) o_.draft->trace(t);
}

void BatchScheduler::add_decodes(StepBatch& b) {
  std::vector<Seq*> decodes;
  int64_t prompt_left = 0;
  for (auto& s : running_) {
    // Not those the step reads a prompt chunk of already (prefill_first).
    if (s->kv < 0 || std::find(b.seqs.begin(), b.seqs.end(), s.get()) != b.seqs.end()) continue;
    const int64_t left = static_cast<int64_t>(s->tokens.size()) - s->computed;
    if (left == 1)
      decodes.push_back(s.get());
    else
      prompt_left += left;
  }
  // The step's other tokens: prompts already in the batch, and those
  // likely to join after the decodes.
  const int64_t other =
      (o_.token_budget - b.budget) +
      std::min(prompt_left, std::max<int64_t>(0, b.budget - static_cast<int64_t>(decodes.size())));
  std::vector<Draft> guesses = guess(decodes, b.budget, other);
  for (size_t i = 0; i < decodes.size(); ++i) {
    Seq* s = decodes[i];
    if (s->kv < 0 || b.budget == 0) continue;  // preempted by one before it
    // Guesses take free pages only: they never preempt another sequence.
    if (pool_.pages_needed(s->kv, 1 + static_cast<int64_t>(guesses[i].tokens.size())) >
        pool_.free_pages())
      guesses[i] = Draft{};
    const int64_t n = 1 + static_cast<int64_t>(guesses[i].tokens.size());
    if (!reserve(*s, n, b.seqs)) continue;
    b.add(s, n, std::move(guesses[i]));
    ++b.decodes;
  }
}

void BatchScheduler::add_prompt_chunks(StepBatch& b) {
  std::vector<Seq*> order;
  for (auto& s : running_) order.push_back(s.get());
  for (Seq* s : order) {
    const int64_t left = static_cast<int64_t>(s->tokens.size()) - s->computed;
    if (s->kv < 0 || left == 1 || b.budget == 0) continue;  // decodes: add_decodes
    const int64_t n = std::min(left, b.budget);
    if (!reserve(*s, n, b.seqs)) continue;
    b.add(s, n, {});
  }
}

void BatchScheduler::admit_newcomers(StepBatch& b) {
  auto slots = [&] {
    int64_t n = 0;
    for (auto& r : running_) n += r->slots();
    return n;
  };
  while (!waiting_.empty() && b.budget > 0 &&
         (running_.empty() || slots() + waiting_.front()->slots() <= o_.max_batch)) {
    Seq& w = *waiting_.front();
    if ((static_cast<int64_t>(w.tokens.size()) + pool_.page() - 1) / pool_.page() >
        pool_.n_pages()) {
      finish(w, "length");  // preempted, then grown past what the whole pool holds
      waiting_.pop_front();
      continue;
    }
    if (!admit(w, b.budget)) break;
    const int64_t n = pool_.length(w.kv) - w.computed;
    std::unique_ptr<Seq> owned = std::move(waiting_.front());
    waiting_.pop_front();
    auto at = std::find_if(running_.begin(), running_.end(), [&](const std::unique_ptr<Seq>& r) {
      return r->arrival > owned->arrival;
    });
    running_.insert(at, std::move(owned));
    b.add(&w, n, {});
  }
}

BatchScheduler::StepBatch BatchScheduler::compose() {
  StepBatch b;
  b.budget = o_.token_budget;
  for (auto& s : running_)
    b.ready += s->kv >= 0 && static_cast<int64_t>(s->tokens.size()) - s->computed == 1;
  switch (o_.policy) {
    case SchedulerPolicy::decode_first:
      add_decodes(b);
      add_prompt_chunks(b);
      admit_newcomers(b);
      break;
    case SchedulerPolicy::prefill_first:
      add_prompt_chunks(b);
      admit_newcomers(b);
      add_decodes(b);
      break;
    case SchedulerPolicy::round_robin:
      // Steps of prompts and steps of decodes take turns; either kind runs
      // alone when the other has nothing to do.
      if (prompt_turn_) {
        add_prompt_chunks(b);
        admit_newcomers(b);
      }
      if (b.seqs.empty()) add_decodes(b);
      if (b.seqs.empty()) {
        add_prompt_chunks(b);
        admit_newcomers(b);
      }
      prompt_turn_ = b.decodes > 0;
      break;
    case SchedulerPolicy::static_batch:
      // A batch is admitted only once the one before it has finished.
      add_decodes(b);
      add_prompt_chunks(b);
      if (running_.empty()) admit_newcomers(b);
      break;
  }
  return b;
}

void BatchScheduler::step() {
  TraceScope span(trace_, "step", "serve");
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

  StepBatch b = compose();
  std::vector<Seq*>& batch = b.seqs;
  std::vector<int64_t>& rows = b.rows;
  std::vector<Draft>& drafts = b.drafts;
  if (batch.empty()) return;

  std::vector<Llm::SeqChunk> chunks;
  for (size_t i = 0; i < batch.size(); ++i) {
    Seq& s = *batch[i];
    auto first = s.tokens.begin() + s.computed;
    std::vector<int32_t> tokens(first, first + (drafts[i].tokens.empty() ? rows[i] : 1));
    tokens.insert(tokens.end(), drafts[i].tokens.begin(), drafts[i].tokens.end());
    chunks.push_back({std::move(tokens), s.computed, pool_.table(s.kv),
                      s.scoring() || !drafts[i].tokens.empty()});
  }
  ++stats_.steps;
  if (trace_) {
    int64_t tokens = 0, guessed = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      guessed += static_cast<int64_t>(drafts[i].tokens.size());
      tokens += rows[i];
    }
    span.add("running", static_cast<int64_t>(running_.size()));
    span.add("waiting", static_cast<int64_t>(waiting_.size()));
    span.add("ready_to_decode", b.ready);
    span.add("sequences", static_cast<int64_t>(batch.size()));
    span.add("decodes", b.decodes);
    span.add("prompt_tokens", tokens - b.decodes - guessed);
    span.add("guesses", guessed);
  }
  const std::vector<float>* logits = nullptr;
  const Clock::time_point t0 = Clock::now();
  try {
    logits = &model_.forward_batch(chunks);
  } catch (const Error& e) {
    for (Seq* s : batch) finish(*s, "", e.what());
    sweep(running_);
    return;
  }
  if (planner_) {
    int64_t tokens = 0;
    for (int64_t r : rows) tokens += r;
    planner_->record_step(tokens, ms_between(t0, Clock::now()));
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
    if (!drafts[i].tokens.empty()) {
      verify(s, drafts[i], row, now);
      continue;
    }
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

std::vector<Draft> BatchScheduler::guess(const std::vector<Seq*>& decodes, int64_t budget,
                                         int64_t other_tokens) {
  std::vector<Draft> drafts(decodes.size());
  if (!planner_) return drafts;
  std::vector<size_t> who;
  std::vector<Acceptance*> acceptances;
  std::vector<int64_t> room;
  for (size_t i = 0; i < decodes.size(); ++i) {
    Seq& s = *decodes[i];
    const GenerationOptions& o = s.req.options;
    if (o.grammar || s.scoring()) continue;
    // Guesses and the token after them, in the output and the cache.
    const int64_t r = std::min(o.n_predict - static_cast<int64_t>(s.result.generated.size()) - 1,
                               model_.n_ctx() - s.computed - 1);
    if (r <= 0) continue;
    who.push_back(i);
    acceptances.push_back(&s.acceptance);
    room.push_back(r);
  }
  if (who.empty()) return drafts;
  std::vector<int64_t> k = planner_->plan(acceptances, room, other_tokens);
  // Every decode's own token first, then guesses in arrival order.
  int64_t spare = budget - static_cast<int64_t>(decodes.size());
  for (int64_t& x : k) {
    x = std::clamp<int64_t>(spare, 0, x);
    spare -= x;
  }
  std::vector<Seq*> seqs;
  for (size_t i : who) seqs.push_back(decodes[i]);
  std::vector<Draft> got(who.size());
  const Clock::time_point t0 = Clock::now();
  if (ngram_) {
    for (size_t j = 0; j < who.size(); ++j)
      if (k[j] > 0) got[j] = ngram_->propose(seqs[j]->tokens, k[j]);
  } else {
    try {
      draft_pass(seqs, k, &got);
    } catch (const Error&) {
      // The draft failing costs its guesses, not the requests: each
      // sequence's draft cache is read again from the start next time.
      for (Seq* s : seqs) free_draft(*s);
      got.assign(who.size(), Draft{});
    }
  }
  int64_t made = 0;
  for (size_t j = 0; j < who.size(); ++j) {
    made += static_cast<int64_t>(got[j].tokens.size());
    drafts[who[j]] = std::move(got[j]);
  }
  if (made > 0) planner_->record_draft(made, ms_between(t0, Clock::now()));
  return drafts;
}

void BatchScheduler::draft_pass(const std::vector<Seq*>& seqs, const std::vector<int64_t>& k,
                                std::vector<Draft>* drafts) {
  Llm& draft = *o_.draft;
  KvPagePool& pool = *draft_pool_;
  const int64_t V = draft.config().n_vocab;
  // Each draft cache is brought to hold the sequence but its last token
  // (rewound to what it shares with it), then reads the rest.
  std::vector<size_t> live;
  std::vector<Llm::SeqChunk> chunks;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (k[i] == 0) continue;
    Seq& s = *seqs[i];
    if (s.draft_kv < 0) s.draft_kv = pool.create();
    const auto n = static_cast<int64_t>(s.tokens.size());
    const int64_t common =
        std::min(reusable_rows(s.draft_cached, s.tokens), pool.length(s.draft_kv));
    pool.truncate(s.draft_kv, common);
    s.draft_cached.assign(s.tokens.begin(), s.tokens.begin() + common);
    if (pool.pages_needed(s.draft_kv, n - common + k[i] - 1) > pool.free_pages())
      continue;  // the draft's pool is full: no guesses this step
    pool.append(s.draft_kv, n - common);
    s.draft_cached = s.tokens;
    chunks.push_back({std::vector<int32_t>(s.tokens.begin() + common, s.tokens.end()), common,
                      pool.table(s.draft_kv), false});
    if (!s.draft_sampler)
      s.draft_sampler.emplace(draft_sampler_options(Seq::seeded(s.req.options.sampler, s.choice)));
    live.push_back(i);
  }
  // Then one token a step for every sequence still guessing.
  while (!live.empty()) {
    const std::vector<float>& logits = draft.forward_batch(chunks);
    std::vector<size_t> still;
    chunks.clear();
    for (size_t r = 0; r < live.size(); ++r) {
      const size_t i = live[r];
      Seq& s = *seqs[i];
      Draft& d = (*drafts)[i];
      std::vector<int32_t> seq = s.tokens;
      seq.insert(seq.end(), d.tokens.begin(), d.tokens.end());
      const int32_t t =
          d.guess(*s.draft_sampler, logits.data() + static_cast<int64_t>(r) * V, V, seq);
      if (static_cast<int64_t>(d.tokens.size()) == k[i]) continue;
      pool.append(s.draft_kv, 1);
      chunks.push_back({{t}, pool.length(s.draft_kv) - 1, pool.table(s.draft_kv), false});
      s.draft_cached.push_back(t);
      still.push_back(i);
    }
    live = std::move(still);
  }
}

void BatchScheduler::verify(Seq& s, const Draft& d, const float* rows, Clock::time_point now) {
  const int64_t V = model_.config().n_vocab, page = pool_.page(), before = s.computed;
  const Verdict v = verify_draft(s.sampler, rows, V, s.tokens, d);
  const auto k = static_cast<int64_t>(d.tokens.size());
  // The cache keeps the last token's row and the accepted guesses'.
  pool_.truncate(s.kv, before + 1 + v.accepted);
  s.acceptance.record(k, v.accepted);
  stats_.spec.add(k, v.accepted);
  s.result.spec.add(k, v.accepted);
  const double each = ms_between(s.last, now) / static_cast<double>(v.tokens.size());
  s.last = now;
  for (size_t j = 0; j < v.tokens.size() && !s.done; ++j) {
    // As a plain step would see it: the rows of every token before this one.
    s.computed = before + 1 + static_cast<int64_t>(j);
    s.result.token_ms.push_back(each);
    take_token(s, v.tokens[j], rows + static_cast<int64_t>(j) * V);
  }
  if (!s.done && s.computed / page > before / page) keep_pages(s);  // a page filled
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
  if (!s.matcher) return take_token(s, s.sampler.sample(logits, V, s.tokens, nullptr), logits);
  // A text under a grammar must be complete when max_tokens is reached:
  // never take a token after which more bytes are needed than tokens are
  // left, and once no more tokens are left than bytes needed, keep to a
  // shortest completion (each of its tokens brings the end closer by its
  // length).
  GrammarMatcher& m = *s.matcher;
  const int64_t left = s.req.options.n_predict - static_cast<int64_t>(s.result.generated.size());
  auto closing = [&] {
    m.fill_closing_mask(&s.mask);
    return std::any_of(s.mask.begin(), s.mask.end(), [](uint32_t w) { return w != 0; });
  };
  const size_t need = m.min_bytes_to_end();
  if (need > 0 && left <= static_cast<int64_t>(need) && closing())
    return take_token(s, s.sampler.sample(logits, V, s.tokens, s.mask.data()), logits);
  m.fill_mask(&s.mask);
  int32_t next = s.sampler.sample(logits, V, s.tokens, s.mask.data());
  if (!model_.tokenizer().is_eog(next)) {
    GrammarMatcher probe = m.fork();
    if (probe.accept(next) && static_cast<int64_t>(probe.min_bytes_to_end()) > left - 1 &&
        closing())
      next = s.sampler.sample(logits, V, s.tokens, s.mask.data());
  }
  take_token(s, next, logits);
}

void BatchScheduler::take_token(Seq& s, int32_t next, const float* logits) {
  const int64_t V = model_.config().n_vocab;
  const GenerationOptions& o = s.req.options;
  if (o.logprobs >= 0) s.result.logprobs.push_back(token_logprob(logits, V, next, o.logprobs));
  if (o.stop_at_eos && model_.tokenizer().is_eog(next)) {
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
