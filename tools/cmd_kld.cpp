// `kiln kld`: how far a run with another KV cache (or any setting that
// changes the numbers) is from a base run, over the same token chunks: per
// position KL divergence of the next-token distributions and the rest of
// llama-perplexity's --kl-divergence statistics (models/kld.h).
//
// Protocol (as llama-perplexity): the tokens are cut into chunks of --ctx,
// each chunk's first token replaced by BOS where the model adds one; each
// chunk is one prefill from an empty cache, so the test run attends over
// its own (for AURA: compressed) cache; the second half of each chunk's
// positions are scored. The base run's logits of a chunk stay in memory
// until the test run has scored it (or come from --base-logits).
#include <cstdio>
#include <memory>
#include <random>
#include <utility>

#include "ir/error.h"
#include "models/kld.h"
#include "models/llm.h"
#include "models/npy.h"
#include "models/read_file.h"
#include "tools/cli.h"

namespace kiln {

namespace {

KvCacheType parse_cache(const std::string& opt, const std::string& text) {
  try {
    return parse_kv_cache_type(text);
  } catch (const Error& e) {
    throw Error("--" + opt + ": " + e.what());
  }
}

std::vector<int32_t> chunk_tokens(const Llm& model, const std::string& prompts, int64_t chunks,
                                  int64_t ctx) {
  std::vector<int32_t> all;
  const int64_t want = chunks * ctx;
  if (!prompts.empty()) {
    all = model.tokenizer().encode(read_file(prompts, "prompt file"), false);
    if (static_cast<int64_t>(all.size()) < want)
      throw Error("prompt file '" + prompts + "' has " + std::to_string(all.size()) +
                  " tokens; --chunks " + std::to_string(chunks) + " x --ctx " +
                  std::to_string(ctx) + " need " + std::to_string(want));
    all.resize(static_cast<size_t>(want));
  } else {
    // No text: tokens drawn uniformly from the vocabulary (seeded), which is
    // what a random-weight model's logits are as sensitive to as any text.
    std::mt19937_64 rng(1234);
    std::uniform_int_distribution<int32_t> pick(0,
                                                static_cast<int32_t>(model.config().n_vocab - 1));
    for (int64_t i = 0; i < want; ++i) all.push_back(pick(rng));
  }
  const int32_t bos = model.tokenizer().bos_id();
  if (model.tokenizer().add_bos_default() && bos >= 0)
    for (int64_t c = 0; c < chunks; ++c) all[static_cast<size_t>(c * ctx)] = bos;
  return all;
}

}  // namespace

int cmd_kld(const std::vector<std::string>& args) {
  CliArgs a(args, {"help"});
  a.allow_only(
      {"help", "model", "base", "test", "prompts", "chunks", "ctx", "threads", "base-logits"});
  if (a.flag("help")) {
    std::puts(
        "usage: kiln kld -m MODEL.gguf --test KV [--base f16] [--prompts FILE] [--chunks 4]\n"
        "                [--ctx 512] [--threads N] [--base-logits FILE.npy]\n"
        "KL divergence of a run with the KV cache --test (aura8v4, q8_0, ...) from one with\n"
        "--base, over --chunks chunks of --ctx tokens (from --prompts, else seeded random\n"
        "tokens), the second half of each chunk scored, as llama-perplexity --kl-divergence\n"
        "reports it; then one JSON line. --base-logits takes the base logits from a file\n"
        "instead, [chunks * ctx, n_vocab] f32 or f16 (every position of each chunk, in order,\n"
        "e.g. saved from llama.cpp through llama-cpp-python with logits_all).");
    return 0;
  }
  std::string path = a.get("model");
  if (path.empty() && !a.positional().empty()) path = a.positional()[0];
  if (path.empty()) throw Error("kld: no model (give -m MODEL.gguf)");
  if (!a.has("test")) throw Error("kld: no --test KV cache type (e.g. --test aura8v4)");
  const KvCacheType base = parse_cache("base", a.get("base", "f16"));
  const KvCacheType test = parse_cache("test", a.get("test"));
  const int64_t chunks = a.get_int("chunks", 4), ctx = a.get_int("ctx", 512);
  if (chunks < 1) throw Error("--chunks " + std::to_string(chunks) + ": need at least 1");
  if (ctx < 4) throw Error("--ctx " + std::to_string(ctx) + ": need at least 4 tokens");
  RuntimeOptions ro;
  ro.threads = static_cast<int>(a.get_int("threads", 0));
  Runtime rt(ro);

  // Positions first .. ctx - 2 of each chunk, each predicting the next token.
  const int64_t first = ctx / 2, scored = ctx - 1 - first;
  std::vector<int32_t> tokens;
  int64_t n_vocab = 0;
  size_t base_bytes = 0, test_bytes = 0;
  std::string test_name;
  std::vector<float> base_logits;  // [chunks][scored][n_vocab]
  // Chunk c from an empty cache: its tokens, and every position's logits.
  auto run_chunk = [&](Llm& model, int64_t c) {
    model.reset();
    std::vector<int32_t> chunk(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx);
    return std::make_pair(chunk, model.forward(chunk, true));
  };
  if (a.has("base-logits")) {
    NpyMatrix m = read_npy(a.get("base-logits"));
    if (m.rows != chunks * ctx)
      throw Error("--base-logits '" + a.get("base-logits") + "': " + std::to_string(m.rows) +
                  " rows for --chunks " + std::to_string(chunks) + " x --ctx " +
                  std::to_string(ctx));
    n_vocab = m.cols;
    for (int64_t c = 0; c < chunks; ++c)
      base_logits.insert(base_logits.end(), m.data.begin() + (c * ctx + first) * n_vocab,
                         m.data.begin() + (c * ctx + first + scored) * n_vocab);
  } else {
    Llm model(path, rt, ctx, base);
    n_vocab = model.config().n_vocab;
    tokens = chunk_tokens(model, a.get("prompts"), chunks, ctx);
    base_bytes = model.kv_cache_bytes();
    for (int64_t c = 0; c < chunks; ++c) {
      const std::vector<float> l = run_chunk(model, c).second;
      base_logits.insert(base_logits.end(), l.begin() + first * n_vocab,
                         l.begin() + (first + scored) * n_vocab);
    }
  }
  KldAccumulator acc;
  {
    Llm model(path, rt, ctx, test);
    if (model.config().n_vocab != n_vocab)
      throw Error("--base-logits: " + std::to_string(n_vocab) + " columns for a vocabulary of " +
                  std::to_string(model.config().n_vocab));
    if (tokens.empty()) tokens = chunk_tokens(model, a.get("prompts"), chunks, ctx);
    test_bytes = model.kv_cache_bytes();
    test_name = kv_cache_type_name(model.kv_type());
    for (int64_t c = 0; c < chunks; ++c) {
      const auto [chunk, l] = run_chunk(model, c);
      for (int64_t j = 0; j < scored; ++j)
        acc.add(base_logits.data() + (c * scored + j) * n_vocab, l.data() + (first + j) * n_vocab,
                n_vocab, chunk[static_cast<size_t>(first + j + 1)]);
    }
  }
  KldStats s = acc.finish();
  std::fputs(s.report().c_str(), stdout);
  const std::string base_name = a.has("base-logits") ? "file" : kv_cache_type_name(base);
  if (base_bytes)
    std::printf("KV cache  : %s %.2f MiB, %s %.2f MiB at %lld tokens (%.2fx smaller)\n",
                base_name.c_str(), base_bytes / 1048576.0, test_name.c_str(),
                test_bytes / 1048576.0, static_cast<long long>(ctx),
                static_cast<double>(base_bytes) / static_cast<double>(test_bytes));
  std::string j = s.json();
  j.pop_back();
  std::printf(
      "%s, \"base\": \"%s\", \"test\": \"%s\", \"chunks\": %lld, \"ctx\": %lld, "
      "\"kv_base_mib\": %.3f, \"kv_test_mib\": %.3f}\n",
      j.c_str(), base_name.c_str(), test_name.c_str(), static_cast<long long>(chunks),
      static_cast<long long>(ctx), base_bytes / 1048576.0, test_bytes / 1048576.0);
  return 0;
}

}  // namespace kiln
