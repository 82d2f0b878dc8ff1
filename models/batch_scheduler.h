// Continuous batching: many generations at once over one serving Llm
// (Llm::forward_batch on a pool of KV pages), as vLLM's scheduler.
//
// Why: a server's requests arrive at any time and are of any length; run
// one at a time, each decode step reads every weight for one token. Here
// each step packs every running sequence's next token and chunks of prompts
// still being read (in the order SchedulerPolicy says), up to a token budget, into one
// forward: weights are read once per step for all of them, sequences join
// and leave between steps, and a long prompt does not stall the others'
// tokens. Prompts share the full KV pages of prefixes computed before
// (runtime/prefix_cache.h). When the pool runs out of pages the latest
// arrived running sequence is preempted: its pages are freed (its full
// pages left in the prefix cache) and it waits again, to be recomputed from
// its prompt and tokens so far, its sampler's state kept, so it continues
// with the tokens it would have produced. Waiting sequences are admitted
// first come, first served, none overtaking another: no starvation.
//
// Embedding requests (GenerationOptions::embed) are whole prompts read in
// a forward of their own at the start of a step, in arrival order up to the
// token budget, their pages taken for that forward and then kept by the
// prefix cache like any prompt's.
//
// One thread calls add, step and stats (a server's engine thread); the
// callbacks run on it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/generation.h"
#include "models/llm.h"
#include "models/speculative.h"
#include "runtime/kv_page_pool.h"
#include "runtime/prefix_cache.h"

namespace kiln {

struct SeqRequest {
  std::vector<int32_t> prompt;
  // n_predict, sampler, stop strings, stop_at_eos, logprobs, and cancelled
  // (asked before every step: true ends the sequence, its pages freed at
  // once). With n_predict 0 and prompt_logprobs the prompt is only scored.
  GenerationOptions options;
  // Samples of the prompt, choices 0 .. n-1: the prompt is read once, then
  // n - 1 sequences fork its pages (copy-on-write, runtime/kv_page_pool.h)
  // and sample from the same logits, choice i with seed + i. The n run
  // together: admitted when max_batch has room for all of them.
  int64_t n = 1;
  // Each released piece of a choice, with its result so far (its tokens
  // and logprobs up to the piece).
  std::function<void(int64_t choice, const std::string& piece, const GenerationResult& so_far)>
      on_text;
  // Called exactly once per choice: the result (stop_reason "length",
  // "eos", "stop string" or "cancelled"), or a non-empty error.
  std::function<void(int64_t choice, const GenerationResult&, const std::string& error)> on_done;
};

// Which work a step takes first (kiln serve --policy).
//  decode_first: every running sequence's next token, then chunks of
//    prompts being read, then newcomers (first come, first served): tokens
//    flow steadily while prompts are read beside them.
//  prefill_first: prompts and newcomers first, decodes with the budget
//    left: a new request's first token sooner, others' next tokens later.
//  round_robin: steps of prompts and steps of decodes take turns, never
//    mixed (as engines without chunked prefill run).
//  static_batch: a batch of requests is admitted only once the one before
//    it has finished (no joining mid-flight): the baseline continuous
//    batching is measured against.
enum class SchedulerPolicy { decode_first, prefill_first, round_robin, static_batch };
// "decode-first", "prefill-first", "round-robin", "static"; else
// kiln::Error listing them.
SchedulerPolicy parse_scheduler_policy(const std::string& name);
std::string scheduler_policy_name(SchedulerPolicy p);

struct SchedulerOptions {
  int64_t max_batch = 8;       // sequences running at once
  int64_t token_budget = 256;  // tokens per step
  bool prefix_cache = true;
  SchedulerPolicy policy = SchedulerPolicy::decode_first;
  // Speculative decoding (models/speculative.h): guesses for the decoding
  // sequences from prompt lookup (ngram > 0: its longest n-gram) or a draft
  // model (a serving Llm of the same vocabulary, kv_pages > 0: its own
  // pool, a sequence each), up to draft_k a sequence as SpecPlanner hands
  // them out (none where the batch's steps are bound by compute), read in
  // the step's forward beside the others and verified. Sequences under a
  // grammar, or scoring their prompt, do not guess. draft_k_fixed: every
  // decoding sequence guesses draft_k (the budget allowing), whatever the
  // costs; sampled output then repeats for a seed (the plan's K follows
  // timings, and with it which random numbers a sequence draws).
  int64_t ngram = 0;
  Llm* draft = nullptr;
  int64_t draft_k = 4;
  bool draft_k_fixed = false;
};

struct SchedulerStats {
  int64_t waiting = 0, running = 0;
  int64_t pages = 0, pages_used = 0, pages_cached = 0;  // of the pool; cached: the prefix cache's
  int64_t steps = 0, preemptions = 0;
  int64_t prompt_tokens = 0, cached_prompt_tokens = 0, generated_tokens = 0;
  SpecCounts spec;  // speculation: steps with guesses, guesses made and kept
};

class BatchScheduler {
 public:
  // model: a serving Llm (kv_pages > 0).
  BatchScheduler(Llm& model, SchedulerOptions o);
  ~BatchScheduler();

  // Queues a request; a prompt the context or the pool cannot hold ends at
  // once with an error.
  void add(SeqRequest r);
  bool idle() const { return waiting_.empty() && running_.empty() && embeds_.empty(); }
  // One forward of the running sequences (none when idle).
  void step();
  SchedulerStats stats() const;
  // Each step from now on adds a "step" span (its sequences, decodes,
  // prompt tokens and guesses) to `t`, and the model's forwards theirs.
  void trace(Trace* t);

 private:
  struct Seq;
  // A step's batch as it is composed: its sequences, the rows each reads
  // and their guesses, the token budget left; how many decode, and how
  // many had a token to decode.
  struct StepBatch {
    std::vector<Seq*> seqs;
    std::vector<int64_t> rows;
    std::vector<Draft> drafts;
    int64_t budget = 0, decodes = 0, ready = 0;
    void add(Seq* s, int64_t n, Draft d) {
      seqs.push_back(s);
      rows.push_back(n);
      drafts.push_back(std::move(d));
      budget -= n;
    }
  };
  // The policy's batch for the next step: the three kinds of work below,
  // in its order.
  StepBatch compose();
  // Each running sequence's next token with its guesses; the next chunks of
  // the prompts being read; waiting sequences admitted first come, first
  // served while the batch and the pool have room.
  void add_decodes(StepBatch& b);
  void add_prompt_chunks(StepBatch& b);
  void admit_newcomers(StepBatch& b);
  bool admit(Seq& s, int64_t budget);
  // The forward of the embedding requests that fit this step.
  void embed_step();
  // Takes `rows` more rows for s in the pool, making the page copies a
  // copy-on-write asks for.
  void append(Seq& s, int64_t rows);
  bool reserve(Seq& s, int64_t rows, const std::vector<Seq*>& scheduled);
  // The sequences of s's other choices, forking its pages once its prompt
  // is read.
  std::vector<Seq*> fork_choices(Seq& s);
  // Scores the prompt tokens a chunk's logits predict (rows from first).
  void score_prompt(Seq& s, int64_t before, int64_t rows, const float* logits);
  // Samples s's next token from `logits`, and takes it.
  void next_token(Seq& s, const float* logits);
  // Appends a token chosen from `logits` to s, and ends s when it is done.
  void take_token(Seq& s, int32_t next, const float* logits);
  // Guesses for the decoding sequences, as many as the plan gives each and
  // the budget allows (speculative decoding), and the draft model's pass.
  std::vector<Draft> guess(const std::vector<Seq*>& decodes, int64_t budget, int64_t other_tokens);
  void draft_pass(const std::vector<Seq*>& seqs, const std::vector<int64_t>& k,
                  std::vector<Draft>* drafts);
  void free_draft(Seq& s);
  // Keeps the guesses of s the target accepts (rows: its logits after the
  // last token and each guess), takes the tokens, and drops the rest's rows.
  void verify(Seq& s, const Draft& d, const float* rows, std::chrono::steady_clock::time_point now);
  void preempt(Seq& s);
  void finish(Seq& s, const std::string& reason, const std::string& error = "");
  void keep_pages(Seq& s);

  Llm& model_;
  SchedulerOptions o_;
  KvPagePool pool_;
  PrefixCache cache_;
  std::optional<SpecPlanner> planner_;
  std::optional<NgramDrafter> ngram_;
  std::optional<KvPagePool> draft_pool_;       // the draft model's pages
  std::deque<std::unique_ptr<Seq>> waiting_;   // by arrival
  std::vector<std::unique_ptr<Seq>> running_;  // by arrival
  std::deque<std::unique_ptr<Seq>> embeds_;    // by arrival
  uint64_t arrivals_ = 0;
  SchedulerStats stats_;
  Trace* trace_ = nullptr;
  bool prompt_turn_ = false;  // round_robin: the next step reads prompts
};

}  // namespace kiln
