// Continuous batching (models/batch_scheduler.h) against unbatched
// generation (models/generation.h) on the same model: requests joining and
// leaving between steps, prompts read in chunks beside decodes, preemption
// when the pool runs short, prefix-cache hits, cancellations. Each request
// must get the tokens and text its own `generate` gives with the same
// options and seed (the logits of a batched step are within 1e-3 of the
// spread of the unbatched ones, test_llm_batch.cpp: far from flipping a
// token of these models), its callbacks exactly once, and at the end no page
// may be held but by the prefix cache.
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <random>

#include "ir/error.h"
#include "models/batch_scheduler.h"
#include "models/generation.h"
#include "models/model_generator.h"
#include "support/runtime_fixture.h"
#include "support/tiny_model.h"

using namespace kiln;

namespace {

const std::string& model_path() {
  static const std::string path = test::tiny_model("llama", WeightFormat::f16, 13);
  return path;
}

constexpr int64_t kCtx = 256, kPage = 32;

struct Request {
  std::vector<int32_t> prompt;
  GenerationOptions options;
  int64_t arrive_step = 0;
  int64_t cancel_step = -1;  // >= 0: cancelled before this step
};

struct Outcome {
  GenerationResult result;
  std::string error, streamed;
  int done_calls = 0;
  int64_t first_text_step = -1, done_step = -1;
};

std::vector<int32_t> prompt_of(int n, int32_t seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(1 + (seed * 31 + i * 17) % 250);
  return p;
}

GenerationOptions greedy(int64_t n) {
  GenerationOptions o;
  o.n_predict = n;
  o.stop_at_eos = false;
  return o;
}

// Runs the requests through a scheduler, adding each at its step.
// With `draft`, guesses come from the model's weights at Q8_0 (a pool of
// the same size).
std::vector<Outcome> serve(const std::vector<Request>& reqs, SchedulerOptions so, int64_t n_pages,
                           SchedulerStats* stats = nullptr, bool draft = false,
                           Trace* trace = nullptr) {
  Llm served(model_path(), test::runtime(), kCtx, DType::f16, kPage, n_pages);
  std::optional<Llm> draft_llm;
  if (draft) {
    draft_llm.emplace(test::tiny_model("llama", WeightFormat::q8_0, 13), test::runtime(), kCtx,
                      DType::f16, kPage, n_pages);
    so.draft = &*draft_llm;
  }
  BatchScheduler sched(served, so);
  sched.trace(trace);
  std::vector<Outcome> out(reqs.size());
  std::vector<bool> cancel(reqs.size());
  int64_t step = 0;
  size_t added = 0;
  while (added < reqs.size() || !sched.idle()) {
    REQUIRE(step < 2000);  // no livelock
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (reqs[i].arrive_step == step) {
        SeqRequest r;
        r.prompt = reqs[i].prompt;
        r.options = reqs[i].options;
        r.options.cancelled = [&cancel, i] { return static_cast<bool>(cancel[i]); };
        r.on_text = [&out, &step, i](int64_t, const std::string& s, const GenerationResult&) {
          out[i].streamed += s;
          if (out[i].first_text_step < 0) out[i].first_text_step = step;
        };
        r.on_done = [&out, &step, i](int64_t, const GenerationResult& g, const std::string& e) {
          out[i].result = g;
          out[i].error = e;
          out[i].done_step = step;
          ++out[i].done_calls;
        };
        sched.add(std::move(r));
        ++added;
      }
      if (reqs[i].cancel_step == step) cancel[i] = true;
    }
    sched.step();
    ++step;
  }
  SchedulerStats st = sched.stats();
  CHECK(st.running == 0);
  CHECK(st.waiting == 0);
  CHECK(st.pages_used == st.pages_cached);  // nothing leaked
  if (!so.prefix_cache) CHECK(st.pages_used == 0);
  if (stats) *stats = st;
  return out;
}

// Each request's unbatched generation.
void check_unbatched(const std::vector<Request>& reqs, const std::vector<Outcome>& got) {
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    CHECK(got[i].done_calls == 1);
    CHECK(got[i].error.empty());
    Llm alone(model_path(), test::runtime(), kCtx);
    GenerationResult want = generate(alone, reqs[i].prompt, reqs[i].options);
    CHECK(got[i].result.generated == want.generated);
    CHECK(got[i].result.text == want.text);
    CHECK(got[i].streamed == want.text);
    CHECK(got[i].result.stop_reason == want.stop_reason);
  }
}

}  // namespace

TEST_CASE("continuous batching gives each request its unbatched tokens", "[models][scheduler]") {
  std::vector<Request> reqs = {
      {prompt_of(5, 1), greedy(12), 0},  {prompt_of(40, 2), greedy(20), 0},
      {prompt_of(70, 3), greedy(9), 2},  {prompt_of(1, 4), greedy(16), 5},
      {prompt_of(33, 5), greedy(14), 6},
  };
  // Sampled: temperature with top-k/top-p and a repetition penalty, seeded.
  reqs[3].options.sampler = SamplerOptions{0.8, 40, 0.95, 1.1, 64, 7};
  // Three at a time, 32 tokens a step: the long prompts are read in chunks
  // beside the others' decodes, and sequences join as others leave.
  SchedulerStats st;
  std::vector<Outcome> got = serve(reqs, {3, 32, false}, 24, &st);
  check_unbatched(reqs, got);
  CHECK(st.preemptions == 0);
  CHECK(st.generated_tokens == 12 + 20 + 9 + 16 + 14);
}

TEST_CASE("every scheduling policy gives each request its unbatched tokens, in its order of work",
          "[models][scheduler]") {
  const std::vector<Request> reqs = {
      {prompt_of(5, 1), greedy(12), 0},
      {prompt_of(40, 2), greedy(20), 0},
      {prompt_of(70, 3), greedy(9), 2},
      {prompt_of(33, 5), greedy(14), 6},
  };
  std::map<SchedulerPolicy, std::vector<Outcome>> got;
  for (SchedulerPolicy p : {SchedulerPolicy::decode_first, SchedulerPolicy::prefill_first,
                            SchedulerPolicy::round_robin, SchedulerPolicy::static_batch}) {
    INFO(scheduler_policy_name(p));
    SchedulerOptions so{3, 32, false};
    so.policy = p;
    Trace trace;
    got[p] = serve(reqs, so, 24, nullptr, false, &trace);
    check_unbatched(reqs, got[p]);
    // The steps as the trace records them: one "step" span each, its forward
    // inside it on the same thread.
    int64_t steps = 0, mixed = 0, skipped_decodes = 0;
    std::vector<Trace::Event> events = trace.events();
    for (const Trace::Event& e : events) {
      if (e.name != "step") continue;
      ++steps;
      auto arg = [&](const char* k) { return std::get<int64_t>(*e.arg(k)); };
      const int64_t decodes = arg("decodes"), prompt = arg("prompt_tokens");
      mixed += decodes > 0 && prompt > 0;
      // A sequence with a token to decode was left out of the step.
      skipped_decodes += decodes < arg("ready_to_decode");
      int64_t forwards = 0;
      for (const Trace::Event& f : events)
        forwards += f.name == "forward" && f.tid == e.tid && f.ts_ns >= e.ts_ns &&
                    f.ts_ns + f.dur_ns <= e.ts_ns + e.dur_ns;
      CHECK(forwards == 1);
    }
    CHECK(steps > 0);
    if (p == SchedulerPolicy::round_robin) CHECK(mixed == 0);  // never a mixed batch
    if (p == SchedulerPolicy::decode_first) CHECK(skipped_decodes == 0);
    if (p == SchedulerPolicy::prefill_first) CHECK(skipped_decodes > 0);
  }
  using P = SchedulerPolicy;
  // Static batches: request 2 (arriving at step 2) starts only once 0 and 1
  // are done; continuous batching lets it join at once.
  const auto& st = got[P::static_batch];
  CHECK(st[2].first_text_step > std::max(st[0].done_step, st[1].done_step));
  CHECK(got[P::decode_first][2].first_text_step < got[P::decode_first][1].done_step);
  // Prompts first: a newcomer arriving beside two decoding sequences has its
  // first token no later than under decodes-first.
  CHECK(got[P::prefill_first][2].first_text_step <= got[P::decode_first][2].first_text_step);
  CHECK_THROWS_WITH(parse_scheduler_policy("fifo"),
                    Catch::Contains("unknown scheduler policy 'fifo'") &&
                        Catch::Contains("decode-first, prefill-first, round-robin, static"));
}

TEST_CASE("preempted sequences are recomputed and continue with the same tokens",
          "[models][scheduler]") {
  // Four sequences of ~100 rows in a pool of 8 pages of 32: at most two fit.
  std::vector<Request> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back({prompt_of(30 + 5 * i, 10 + i), greedy(70), 0});
  reqs[2].options.sampler = SamplerOptions{0.7, 20, 0.9, 1.0, 64, 99};
  for (bool cache : {false, true}) {
    INFO("prefix cache " << cache);
    SchedulerStats st;
    std::vector<Outcome> got = serve(reqs, {4, 64, cache}, 8, &st);
    CHECK(st.preemptions > 0);
    check_unbatched(reqs, got);
  }
}

TEST_CASE("speculative serving gives each request its unbatched tokens",
          "[models][scheduler][speculative]") {
  // Greedy requests guessing by prompt lookup and by a draft model, K fixed
  // so every decode guesses: plain decoding's tokens, with chunked prompts,
  // sequences joining and leaving, the prefix cache, and preemption (a pool
  // of 8 pages: the guesses' rows count against it too).
  std::vector<int32_t> loop;
  for (int r = 0; r < 4; ++r)
    for (int32_t t : {17, 42, 99, 7, 150}) loop.push_back(t);
  std::vector<Request> reqs = {{loop, greedy(40), 0},
                               {prompt_of(40, 2), greedy(30), 0},
                               {prompt_of(70, 3), greedy(25), 2},
                               {prompt_of(1, 4), greedy(16), 5}};
  // Four sequences of ~100 rows in 8 pages of 32: at most two fit.
  std::vector<Request> tight = {{loop, greedy(70), 0}};
  for (int i = 1; i < 4; ++i) tight.push_back({prompt_of(30 + 5 * i, 10 + i), greedy(70), 0});
  for (bool by_draft : {false, true}) {
    for (bool preempting : {false, true}) {
      INFO((by_draft ? "draft model" : "prompt lookup") << (preempting ? ", preempting" : ""));
      SchedulerOptions so =
          preempting ? SchedulerOptions{4, 64, true} : SchedulerOptions{3, 32, false};
      so.ngram = by_draft ? 0 : 3;
      so.draft_k = 3;
      so.draft_k_fixed = true;
      SchedulerStats st;
      const std::vector<Request>& rs = preempting ? tight : reqs;
      std::vector<Outcome> got = serve(rs, so, preempting ? 8 : 24, &st, by_draft);
      check_unbatched(rs, got);
      CHECK(st.spec.steps > 0);
      CHECK(st.spec.accepted_tokens > 0);
      CHECK(st.spec.accepted_tokens < st.spec.draft_tokens);
      CHECK(st.generated_tokens == (preempting ? 4 * 70 : 40 + 30 + 25 + 16));
      int64_t kept = 0;
      for (const Outcome& o : got) kept += o.result.spec.accepted_tokens;
      CHECK(kept == st.spec.accepted_tokens);
      if (preempting) CHECK(st.preemptions > 0);
    }
  }
  // Sampled, K fixed: the same tokens for the same seed, run after run.
  std::vector<Request> sampled = {{loop, greedy(24), 0}, {prompt_of(30, 6), greedy(24), 1}};
  for (Request& r : sampled) r.options.sampler = SamplerOptions{0.8, 20, 0.95, 1.0, 64, 5};
  SchedulerOptions so{2, 32, false};
  so.draft_k = 2;
  so.draft_k_fixed = true;
  std::vector<Outcome> a = serve(sampled, so, 24, nullptr, true),
                       b = serve(sampled, so, 24, nullptr, true);
  for (size_t i = 0; i < sampled.size(); ++i) CHECK(a[i].result.generated == b[i].result.generated);
  so.draft_k = 17;
  CHECK_THROWS_WITH(serve(sampled, so, 24, nullptr, true), Catch::Contains("expected 1 to 16"));
}

TEST_CASE("a shared prefix is computed once and gives the same tokens", "[models][scheduler]") {
  const std::vector<int32_t> system = prompt_of(96, 21);
  auto with = [&](std::vector<int32_t> tail) {
    std::vector<int32_t> p = system;
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  // The second and third arrive once the first has filled the cache.
  std::vector<Request> reqs = {{with(prompt_of(7, 22)), greedy(10), 0},
                               {with(prompt_of(12, 23)), greedy(10), 6},
                               {with(prompt_of(3, 24)), greedy(10), 6}};
  SchedulerStats st;
  std::vector<Outcome> got = serve(reqs, {4, 256, true}, 24, &st);
  check_unbatched(reqs, got);
  CHECK(st.cached_prompt_tokens == 2 * 96);  // three full pages each
  CHECK(st.pages_cached > 0);
  SchedulerStats off;
  serve(reqs, {4, 256, false}, 24, &off);
  CHECK(off.cached_prompt_tokens == 0);
}

TEST_CASE("cancelled and finished sequences free their pages; every request ends once",
          "[models][scheduler]") {
  std::mt19937 rng(5);
  std::vector<Request> reqs;
  for (int i = 0; i < 24; ++i) {
    Request r{prompt_of(1 + static_cast<int>(rng() % 90), 40 + i),
              greedy(1 + static_cast<int64_t>(rng() % 40)), static_cast<int64_t>(rng() % 30)};
    if (i % 3 == 0) r.cancel_step = r.arrive_step + static_cast<int64_t>(rng() % 12);
    reqs.push_back(r);
  }
  for (bool cache : {false, true}) {
    std::vector<Outcome> got = serve(reqs, {6, 48, cache}, 10);
    for (size_t i = 0; i < reqs.size(); ++i) {
      INFO("request " << i);
      CHECK(got[i].done_calls == 1);
      CHECK(got[i].error.empty());
      const std::string& why = got[i].result.stop_reason;
      CHECK((why == "length" || why == "cancelled"));
      if (why == "length")
        CHECK(got[i].result.generated.size() == static_cast<size_t>(reqs[i].options.n_predict));
    }
  }
}

TEST_CASE("the scheduler refuses prompts it cannot hold, and a model without a pool",
          "[models][scheduler][error]") {
  Llm served(model_path(), test::runtime(), 64, DType::f16, kPage, 3);
  BatchScheduler sched(served, {2, 16, true});
  std::map<std::string, std::string> errors;
  auto add = [&](const std::string& name, std::vector<int32_t> prompt) {
    SeqRequest r;
    r.prompt = std::move(prompt);
    r.options = greedy(4);
    r.on_done = [&errors, name](int64_t, const GenerationResult&, const std::string& e) {
      errors[name] = e;
    };
    sched.add(std::move(r));
  };
  add("empty", {});
  add("long", prompt_of(65, 1));
  CHECK_THAT(errors["empty"], Catch::Contains("the prompt has no tokens"));
  CHECK_THAT(errors["long"], Catch::Contains("65 tokens exceed the context of 64"));
  CHECK(sched.idle());
  Llm pool_of_one(model_path(), test::runtime(), 128, DType::f16, kPage, 1);
  BatchScheduler small(pool_of_one, {2, 16, true});
  SeqRequest r;
  r.prompt = prompt_of(40, 2);
  std::string error;
  r.on_done = [&error](int64_t, const GenerationResult&, const std::string& e) { error = e; };
  small.add(std::move(r));
  CHECK_THAT(error, Catch::Contains("exceed the KV pool of 1 pages of 32"));
  Llm single(model_path(), test::runtime(), 64);
  REQUIRE_THROWS_WITH(BatchScheduler(single, {}), Catch::Contains("not a serving pool"));
  REQUIRE_THROWS_WITH(BatchScheduler(served, {4, 2, true}),
                      Catch::Contains("a budget of at least max_batch tokens"));
}

TEST_CASE("n choices read the prompt once and fork its pages; logprobs are the model's",
          "[models][scheduler]") {
  // 45 tokens: a full page shared by the forks, and a partial one each
  // copies before writing into it.
  const std::vector<int32_t> prompt = prompt_of(45, 3);
  GenerationOptions o;
  o.n_predict = 6;
  o.stop_at_eos = false;
  o.sampler.temperature = 0.9;
  o.sampler.top_k = 0;
  o.sampler.top_p = 1;
  o.sampler.seed = 5;
  o.logprobs = 2;
  o.prompt_logprobs = true;
  constexpr int64_t kChoices = 3;

  Llm served(model_path(), test::runtime(), kCtx, DType::f16, kPage, 8);
  BatchScheduler sched(served, {4, 64, true});
  std::vector<Outcome> got(kChoices);
  SeqRequest r;
  r.prompt = prompt;
  r.options = o;
  r.n = kChoices;
  r.on_done = [&got](int64_t c, const GenerationResult& g, const std::string& e) {
    got[static_cast<size_t>(c)].result = g;
    got[static_cast<size_t>(c)].error = e;
    ++got[static_cast<size_t>(c)].done_calls;
  };
  sched.add(std::move(r));
  while (!sched.idle()) sched.step();
  const SchedulerStats st = sched.stats();
  CHECK(st.prompt_tokens == static_cast<int64_t>(prompt.size()));  // read once
  CHECK(st.pages_used == st.pages_cached);

  auto log_softmax = [](const float* row, int64_t n, int32_t t) {
    double mx = row[0], sum = 0;
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(row[i]));
    for (int64_t i = 0; i < n; ++i) sum += std::exp(row[i] - mx);
    return row[t] - mx - std::log(sum);
  };
  for (int64_t c = 0; c < kChoices; ++c) {
    INFO("choice " << c);
    const Outcome& out = got[static_cast<size_t>(c)];
    REQUIRE(out.done_calls == 1);
    REQUIRE(out.error.empty());
    Llm single(model_path(), test::runtime(), kCtx);
    GenerationOptions alone = o;
    alone.sampler.seed += static_cast<uint64_t>(c);
    alone.all_logits = true;
    const GenerationResult want = generate(single, prompt, alone);
    CHECK(out.result.generated == want.generated);
    const int64_t V = single.config().n_vocab;
    REQUIRE(out.result.prompt_logprobs.size() == prompt.size() - 1);
    for (size_t i = 1; i < prompt.size(); ++i)
      CHECK(out.result.prompt_logprobs[i - 1].logprob ==
            Approx(log_softmax(&want.logits[(i - 1) * V], V, prompt[i])).margin(1e-3));
    REQUIRE(out.result.logprobs.size() == out.result.generated.size());
    for (size_t i = 0; i < out.result.generated.size(); ++i) {
      const float* row = &want.logits[(prompt.size() - 1 + i) * V];
      const TokenLogprob& lp = out.result.logprobs[i];
      CHECK(lp.logprob == Approx(log_softmax(row, V, out.result.generated[i])).margin(1e-3));
      REQUIRE(lp.top.size() == 2);
      CHECK(lp.top[0].second >= lp.top[1].second);
      CHECK(lp.top[0].second == Approx(log_softmax(row, V, lp.top[0].first)).margin(1e-3));
    }
  }
  CHECK(got[0].result.generated != got[1].result.generated);
}

TEST_CASE("a scored prompt with nothing to generate ends each choice after the prompt",
          "[models][scheduler]") {
  Llm served(model_path(), test::runtime(), kCtx, DType::f16, kPage, 4);
  BatchScheduler sched(served, {4, 64, true});
  std::vector<Outcome> got(2);
  SeqRequest r;
  r.prompt = prompt_of(10, 4);
  r.options = greedy(0);
  r.options.logprobs = 0;
  r.options.prompt_logprobs = true;
  r.n = 2;
  r.on_done = [&got](int64_t c, const GenerationResult& g, const std::string& e) {
    got[static_cast<size_t>(c)] = {g, e, "", got[static_cast<size_t>(c)].done_calls + 1};
  };
  sched.add(std::move(r));
  while (!sched.idle()) sched.step();
  for (const Outcome& o : got) {
    CHECK(o.done_calls == 1);
    CHECK(o.result.stop_reason == "length");
    CHECK(o.result.generated.empty());
    CHECK(o.result.prompt_logprobs.size() == 9);
  }
}

TEST_CASE("embeddings are read beside running generations and pool the final hidden states",
          "[models][scheduler]") {
  Llm served(model_path(), test::runtime(), kCtx, DType::f16, kPage, 8);
  BatchScheduler sched(served, {4, 40, true});
  std::vector<Outcome> got(4);
  auto add = [&](size_t i, std::vector<int32_t> prompt, GenerationOptions o) {
    SeqRequest r;
    r.prompt = std::move(prompt);
    r.options = o;
    r.on_done = [&got, i](int64_t, const GenerationResult& g, const std::string& e) {
      got[i] = {g, e, "", got[i].done_calls + 1};
    };
    sched.add(std::move(r));
  };
  GenerationOptions embed;
  embed.embed = true;
  embed.n_predict = 0;
  // A generation, then three embeddings of which two exceed one step's
  // budget of 40 tokens together.
  add(0, prompt_of(12, 7), greedy(8));
  sched.step();
  add(1, prompt_of(30, 8), embed);
  add(2, prompt_of(25, 9), embed);
  add(3, prompt_of(5, 10), embed);
  while (!sched.idle()) sched.step();
  Llm single(model_path(), test::runtime(), kCtx);
  CHECK(got[0].result.generated == generate(single, prompt_of(12, 7), greedy(8)).generated);
  const int64_t E = single.config().n_embd;
  for (size_t i = 1; i < got.size(); ++i) {
    INFO("embedding " << i);
    REQUIRE(got[i].done_calls == 1);
    REQUIRE(got[i].error.empty());
    single.reset();
    const std::vector<int32_t> prompt = prompt_of(i == 1 ? 30 : i == 2 ? 25 : 5, 7 + int32_t(i));
    const std::vector<float>& rows = single.hidden_states(prompt);
    REQUIRE(got[i].result.embedding.size() == static_cast<size_t>(E));
    const int64_t n = static_cast<int64_t>(prompt.size());
    for (int64_t e = 0; e < E; ++e) {
      double mean = 0;
      for (int64_t t = 0; t < n; ++t) mean += rows[t * E + e] / double(n);
      CHECK(got[i].result.embedding[e] == Approx(mean).margin(1e-3));
    }
  }
  const SchedulerStats st = sched.stats();
  CHECK(st.pages_used == st.pages_cached);
}
