// Speculative decoding (models/speculative.h) against plain decoding:
// - greedy: the same tokens as `generate` without a drafter, for every
//   architecture, KV cache type (f16, q8_0, AURA) and paging, with a draft
//   model (the target's weights at Q8_0: most guesses kept) and prompt
//   lookup, K fixed so every step guesses; the logits kept per position are
//   the plain run's (the verify forward is a prefill of K + 1 tokens, within
//   test_llm.cpp's decode-vs-prefill tolerance, 2e-3 of the spread);
// - sampled: the acceptance rule's output has the target's distribution, by
//   chi-square, on fixed distributions (verify_draft alone) and end to end
//   (the joint distribution of three tokens of a tiny model, top-2, its
//   exact probabilities from the model's own forwards);
// - the proposers (prompt lookup's matches), the adaptive K's choices, and
//   bad input (another vocabulary, K out of range, an unknown --spec).
// Chi-square bars are at p = 1e-4 for the degrees of freedom; the draws are
// seeded, so a pass is not luck that can run out.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "ir/error.h"
#include "models/generation.h"
#include "models/speculative.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"
#include "support/tiny_model.h"

using namespace kiln;

namespace {

// A prompt that repeats itself, so prompt lookup finds matches.
std::vector<int32_t> looping_prompt() {
  std::vector<int32_t> p;
  for (int r = 0; r < 3; ++r)
    for (int32_t t : {17, 42, 99, 7, 150, 3}) p.push_back(t);
  return p;
}

GenerationOptions greedy(int64_t n) {
  GenerationOptions o;
  o.n_predict = n;
  o.stop_at_eos = false;
  o.all_logits = true;
  return o;
}

struct Setup {
  const char* family;
  KvCacheType kv = DType::f16;
  int64_t page = 0;
};

// Returns the guesses kept and made.
std::pair<int64_t, int64_t> check_greedy(const Setup& s) {
  const std::string target_path = test::tiny_model(s.family, WeightFormat::f16, 3);
  const std::string draft_path = test::tiny_model(s.family, WeightFormat::q8_0, 3);
  constexpr int64_t kCtx = 96;
  const std::vector<int32_t> prompt = looping_prompt();
  Llm plain(target_path, test::runtime(), kCtx, s.kv, s.page);
  GenerationResult want = generate(plain, prompt, greedy(40));
  const double sp = test::spread(want.logits);
  Llm draft(draft_path, test::runtime(), kCtx, s.kv);
  DraftModel by_model(draft, {});
  NgramDrafter by_lookup;
  int64_t kept = 0, guessed = 0;
  for (Drafter* d : {static_cast<Drafter*>(&by_model), static_cast<Drafter*>(&by_lookup)}) {
    INFO(s.family << " kv " << kv_cache_type_name(s.kv) << " page " << s.page << " drafter "
                  << d->name());
    Llm target(target_path, test::runtime(), kCtx, s.kv, s.page);
    GenerationOptions o = greedy(40);
    o.drafter = d;
    o.draft_k = 4;
    o.draft_k_fixed = true;
    GenerationResult got = generate(target, prompt, o);
    CHECK(got.generated == want.generated);
    CHECK(got.spec.steps > 0);
    CHECK(got.spec.accepted_tokens <= got.spec.draft_tokens);
    kept += got.spec.accepted_tokens;
    guessed += got.spec.draft_tokens;
    // A row per position read, the plain run's.
    REQUIRE(got.logits.size() == want.logits.size());
    double worst = 0;
    for (size_t i = 0; i < got.logits.size(); ++i)
      worst = std::max(worst, std::fabs(static_cast<double>(got.logits[i]) - want.logits[i]));
    CHECK(worst <= 2e-3 * sp);
    // The cache holds the prompt and every token but the last: a plain
    // step after it continues the sequence.
    CHECK(target.pos() == static_cast<int64_t>(prompt.size() + got.generated.size()) - 1);
  }
  CHECK(kept > 0);
  return {kept, guessed};
}

// Pearson's chi-square of counts against probabilities.
double chi_square(const std::map<std::vector<int32_t>, int64_t>& counts,
                  const std::map<std::vector<int32_t>, double>& probs, int64_t n) {
  double x2 = 0;
  for (const auto& [key, p] : probs) {
    const double e = p * static_cast<double>(n);
    auto it = counts.find(key);
    const double o = it == counts.end() ? 0 : static_cast<double>(it->second);
    x2 += (o - e) * (o - e) / e;
  }
  for (const auto& [key, c] : counts) REQUIRE(probs.count(key));  // nothing outside the support
  return x2;
}

// The chi-square value p = 1e-4 leaves above it, for df degrees of freedom
// (Wilson-Hilferty).
double chi_square_bar(int df) {
  const double z = 3.719, a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

}  // namespace

TEST_CASE("greedy speculation gives plain decoding's tokens on every architecture",
          "[models][speculative]") {
  int64_t kept = 0, guessed = 0;
  for (const char* family :
       {"llama", "qwen2", "qwen3", "qwen3moe", "llama-moe", "gemma3", "gpt-oss"}) {
    auto [k, g] = check_greedy({family});
    kept += k, guessed += g;
  }
  CHECK(kept < guessed);  // guesses were refused too
}

TEST_CASE("greedy speculation gives plain decoding's tokens on every KV cache and paged",
          "[models][speculative]") {
  check_greedy({"llama", DType::i8});
  check_greedy({"llama", AuraScheme{4, 4}});
  check_greedy({"gemma3", AuraScheme{4, 4}});  // windowed layers
  check_greedy({"llama", DType::f16, 16});
  check_greedy({"qwen3", DType::i8, 16});
}

TEST_CASE("the acceptance rule draws from the target's distribution", "[models][speculative]") {
  // Six tokens; the target's rows differ per position, the draft's q puts
  // its weight elsewhere (and one token p does not have under top-k).
  constexpr int64_t V = 6, K = 2;
  const std::vector<float> rows = {0.2f,  1.5f,  -0.3f, 0.9f, 0.0f, -2.0f,  // after the history
                                   1.1f,  -0.5f, 0.4f,  0.0f, 2.0f, 0.3f,   // after guess 1
                                   -1.0f, 0.0f,  1.0f,  0.5f, 0.2f, 0.8f};  // after guess 2
  const std::vector<double> q0 = {0.05, 0.05, 0.4, 0.1, 0.3, 0.1},
                            q1 = {0.3, 0.3, 0.1, 0.1, 0.1, 0.1};
  for (int64_t top_k : {0, 3}) {
    SamplerOptions so{1.0, top_k, 1.0, 1.0, 64, 11};
    for (bool point_mass : {false, true}) {
      INFO("top_k " << top_k << (point_mass ? " guesses of probability 1" : " sampled guesses"));
      Sampler target(so);
      // The exact distribution of the first two tokens emitted.
      const std::vector<int32_t> history = {1, 2};
      TokenDist p0 = target.distribution(rows.data(), V, history);
      std::map<std::vector<int32_t>, double> want;
      for (int32_t a : p0.ids) {
        std::vector<int32_t> h = history;
        h.push_back(a);
        TokenDist p1 = target.distribution(rows.data() + V, V, h);
        for (int32_t b : p1.ids) want[{a, b}] = p0.prob(a) * p1.prob(b);
      }
      std::mt19937_64 rng(5);
      std::map<std::vector<int32_t>, int64_t> got;
      constexpr int64_t kDraws = 40000;
      for (int64_t n = 0; n < kDraws; ++n) {
        Draft d;
        for (const auto* q : {&q0, &q1}) {
          std::discrete_distribution<int32_t> pick(q->begin(), q->end());
          d.tokens.push_back(pick(rng));
          if (!point_mass) {
            TokenDist td;
            for (int32_t t = 0; t < V; ++t) td.ids.push_back(t), td.weights.push_back((*q)[t]);
            d.dists.push_back(td);
          }
        }
        Verdict v = verify_draft(target, rows.data(), V, history, d);
        REQUIRE(v.tokens.size() == static_cast<size_t>(v.accepted + 1));
        REQUIRE(v.accepted <= K);
        if (v.tokens.size() >= 2) {
          ++got[{v.tokens[0], v.tokens[1]}];
        } else {
          // The second token comes from the next step: drawn from the
          // target's row after the first, as a plain step would.
          std::vector<int32_t> h = history;
          h.push_back(v.tokens[0]);
          ++got[{v.tokens[0], target.sample(rows.data() + V, V, h)}];
        }
      }
      const double x2 = chi_square(got, want, kDraws);
      INFO("chi-square " << x2 << " over " << want.size() << " cells");
      CHECK(x2 < chi_square_bar(static_cast<int>(want.size()) - 1));
    }
  }
}

TEST_CASE("sampled speculation keeps a model's distribution of whole continuations",
          "[models][speculative]") {
  // top-2 sampling of four tokens: 16 continuations, whose exact
  // probabilities come from plain forwards of the target. The draft is the
  // target's weights at Q4_0, whose top two often differ from the target's
  // on these nearly flat logits, so guesses are kept and refused and the
  // residual draws are exercised. (Prompt lookup's guesses of probability 1
  // are verify_draft's case above: here they would rarely match.)
  const std::string path = test::tiny_model("llama", WeightFormat::f16, 3);
  const std::vector<int32_t> prompt = {5, 9, 5, 9, 5};
  SamplerOptions so{1.0, 2, 1.0, 1.0, 64, 0};
  Llm exact(path, test::runtime(), 32);
  const int64_t V = exact.config().n_vocab;
  Sampler ref(so);
  std::map<std::vector<int32_t>, double> want;
  auto dist_after = [&](const std::vector<int32_t>& seq) {
    exact.reset();
    const std::vector<float>& l = exact.forward(seq);
    return ref.distribution(l.data() + l.size() - V, V, seq);
  };
  constexpr int64_t kTokens = 4;  // 16 continuations
  std::function<void(const std::vector<int32_t>&, double)> walk =
      [&](const std::vector<int32_t>& seq, double p) {
        if (static_cast<int64_t>(seq.size() - prompt.size()) == kTokens) {
          want[std::vector<int32_t>(seq.begin() + static_cast<int64_t>(prompt.size()), seq.end())] =
              p;
          return;
        }
        TokenDist d = dist_after(seq);
        for (int32_t t : d.ids) {
          std::vector<int32_t> next = seq;
          next.push_back(t);
          walk(next, p * d.prob(t));
        }
      };
  walk(prompt, 1.0);
  REQUIRE(want.size() == 16);
  Llm target(path, test::runtime(), 32);
  Llm draft_llm(test::tiny_model("llama", WeightFormat::q4_0, 3), test::runtime(), 32);
  {
    std::map<std::vector<int32_t>, int64_t> got;
    constexpr int64_t kDraws = 1500;
    int64_t kept = 0, guessed = 0;
    for (int64_t n = 0; n < kDraws; ++n) {
      GenerationOptions o;
      o.n_predict = kTokens;
      o.stop_at_eos = false;
      o.sampler = so;
      o.sampler.seed = static_cast<uint64_t>(1000 + n);
      DraftModel by_model(draft_llm, o.sampler);
      o.drafter = &by_model;
      o.draft_k = 2;
      o.draft_k_fixed = true;
      target.reset();
      GenerationResult r = generate(target, prompt, o);
      REQUIRE(r.generated.size() == kTokens);
      ++got[r.generated];
      kept += r.spec.accepted_tokens;
      guessed += r.spec.draft_tokens;
    }
    CHECK(kept > 0);
    CHECK(kept < guessed);
    const double x2 = chi_square(got, want, kDraws);
    INFO("chi-square " << x2);
    CHECK(x2 < chi_square_bar(static_cast<int>(want.size()) - 1));
  }
}

TEST_CASE("prompt lookup guesses what followed the last n-gram's latest occurrence",
          "[models][speculative]") {
  NgramDrafter d(3);
  // "7 8" occurred twice; the later one was followed by 4 5.
  CHECK(d.propose({7, 8, 1, 2, 7, 8, 4, 5, 9, 7, 8}, 3).tokens == std::vector<int32_t>{4, 5, 9});
  // The longest suffix first: "2 7 8" matches at the start only.
  CHECK(d.propose({2, 7, 8, 1, 7, 8, 3, 2, 7, 8}, 2).tokens == std::vector<int32_t>{1, 7});
  // A repeating pattern continues past the history's end.
  CHECK(d.propose({5, 6, 5, 6}, 5).tokens == std::vector<int32_t>{5, 6, 5, 6, 5});
  CHECK(d.propose({1, 2, 3}, 4).tokens.empty());
  CHECK(d.propose({1}, 4).tokens.empty());
  CHECK(make_spec_drafter("ngram:2")->name() == "ngram");
  CHECK_THROWS_WITH(make_spec_drafter("ngram:9"), Catch::Contains("the n-gram length is 1 to 8"));
  CHECK_THROWS_WITH(make_spec_drafter("ngram:x"), Catch::Contains("expected ngram or ngram:N"));
  CHECK_THROWS_WITH(make_spec_drafter("medusa"), Catch::Contains("unknown speculation"));
}

TEST_CASE("the planned K follows acceptance and cost, and stops guessing when it does not pay",
          "[models][speculative]") {
  // A step of T tokens takes 10 + 1.5 T ms, a guess 0.5 ms.
  auto step_ms = [](int64_t t) { return 10 + 1.5 * static_cast<double>(t); };
  auto feed = [&](SpecPlanner& p, Acceptance& acc, double acceptance, int steps) {
    std::mt19937_64 rng(3);
    std::bernoulli_distribution keep(acceptance);
    p.record_step(1, step_ms(1));  // the plain baseline
    for (int s = 0; s < steps; ++s) {
      const int64_t k = p.plan({&acc}, {100})[0];
      if (k > 0) p.record_draft(k, 0.5 * static_cast<double>(k));
      int64_t a = 0;
      while (a < k && keep(rng)) ++a;
      if (k > 0) acc.record(k, a);
      p.record_step(k + 1, step_ms(k + 1));
    }
  };
  SpecPlanner high(8);
  Acceptance a_high;
  feed(high, a_high, 0.9, 200);
  CHECK(a_high.rate() > 0.8);
  CHECK(high.step_ms(3) == Approx(step_ms(3)));
  // E(K) = (1 - a^(K+1)) / (1 - a); speed-up = E(K) * 11.5 / (0.5 K + 10 + 1.5 (K + 1)).
  const double a = a_high.rate(), e4 = (1 - std::pow(a, 5)) / (1 - a);
  CHECK(a_high.expected_tokens(4) == Approx(e4));
  CHECK(high.predicted_speedup(a_high, 4) == Approx(e4 * 11.5 / (2 + 10 + 7.5)));
  const int64_t k = high.plan({&a_high}, {100})[0];
  CHECK(k >= 4);
  // K is the speed-up's best, give or take the 2 % a guess must clear.
  for (int64_t j = 1; j <= 8; ++j)
    CHECK(high.predicted_speedup(a_high, k) >= high.predicted_speedup(a_high, j) / 1.03);
  CHECK(high.plan({&a_high}, {2})[0] == 2);  // no more than the room

  SpecPlanner low(8);
  Acceptance a_low;
  feed(low, a_low, 0.1, 200);
  CHECK(a_low.rate() < 0.3);
  // Probes, each refused: every 16th step, then ever less often.
  int64_t guessing = 0;
  for (int s = 0; s < 600; ++s) {
    const int64_t k = low.plan({&a_low}, {100})[0];
    if (k > 0) a_low.record(k, 0);
    guessing += k > 0;
  }
  CHECK(guessing >= 2);
  CHECK(guessing <= 6);

  // A batch of 8 whose steps cost mostly per token (0.5 + 10 T ms): guessing
  // for all would slow every one of them, so nobody guesses.
  SpecPlanner full(4);
  for (int64_t t : {8, 12, 16, 24}) full.record_step(t, 0.5 + 10 * static_cast<double>(t));
  std::vector<Acceptance> accs(8);
  std::vector<Acceptance*> ptrs;
  for (auto& x : accs) {
    x.record(4, 3);
    ptrs.push_back(&x);
  }
  // Not even a guess sure to be kept would pay there: no probes either.
  for (int s = 0; s < 100; ++s) {
    std::vector<int64_t> ks = full.plan(ptrs, std::vector<int64_t>(8, 100));
    CHECK(std::count(ks.begin(), ks.end(), 0) == 8);
  }
  std::vector<int64_t> ks;
  // The same batch where a step's cost is mostly fixed (100 + 0.5 T ms):
  // each guesses.
  SpecPlanner light(4);
  for (int64_t t : {8, 12, 16, 24}) light.record_step(t, 100 + 0.5 * static_cast<double>(t));
  ks = light.plan(ptrs, std::vector<int64_t>(8, 100));
  CHECK(std::count(ks.begin(), ks.end(), 0) == 0);

  SpecPlanner fixed(3, false);
  Acceptance none;
  feed(fixed, none, 0.0, 50);
  CHECK(fixed.plan({&none}, {100})[0] == 3);
}

TEST_CASE("a draft of another vocabulary, K out of range and a draft too large are named",
          "[models][speculative]") {
  auto make = [](std::vector<std::string> tokens, int32_t eos) {
    Vocab v;
    v.model = "llama";
    v.tokens = std::move(tokens);
    v.unk = 0;
    v.eos = eos;
    v.finish("test");
    return Tokenizer::create(v);
  };
  auto target = make({"a", "b", "c", "d"}, 3);
  CHECK_NOTHROW(check_draft_vocab(*target, *make({"a", "b", "c", "d"}, 3)));
  CHECK_THROWS_WITH(check_draft_vocab(*target, *make({"a", "b", "c"}, 2)),
                    Catch::Contains("the draft has 3 tokens, the target 4"));
  CHECK_THROWS_WITH(check_draft_vocab(*target, *make({"a", "x", "c", "d"}, 3)),
                    Catch::Contains("token 1 is 'x' in the draft, 'b' in the target"));
  CHECK_THROWS_WITH(check_draft_vocab(*target, *make({"a", "b", "c", "d"}, 2)),
                    Catch::Contains("EOS is token 2 in the draft, 3 in the target"));

  const std::string path = test::tiny_model("llama", WeightFormat::f16, 3);
  Llm model(path, test::runtime(), 32), same(path, test::runtime(), 32),
      smaller(test::tiny_model("llama", WeightFormat::q8_0, 3), test::runtime(), 32);
  CHECK_THAT(draft_size_warning(model, same), Catch::Contains("not smaller than the target's"));
  CHECK(draft_size_warning(model, smaller).empty());
  NgramDrafter lookup;
  GenerationOptions o = greedy(4);
  o.drafter = &lookup;
  for (int64_t k : {0, 17}) {
    o.draft_k = k;
    CHECK_THROWS_WITH(generate(model, {1, 2, 3}, o), Catch::Contains("expected 1 to 16"));
  }
}
