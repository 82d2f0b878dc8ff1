// `kiln moe-stats` and `kiln prune-experts`: an MoE model's expert hit map
// over a prompt file, and a copy of the model with the K most used experts
// of each layer (models/expert_pruning.h).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>

#include "ir/error.h"
#include "models/expert_pruning.h"
#include "models/hf_checkpoint.h"
#include "models/llm.h"
#include "models/read_file.h"
#include "models/tokenizer.h"
#include "tools/cli.h"

namespace kiln {

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error("cannot write '" + path + "'");
}

// Each layer's counts (up to 16 experts) or its 8 most used, with shares.
void print_hits(const ExpertHits& h) {
  std::printf("expert hits over %lld prompt tokens (%lld layers x %lld experts)\n",
              static_cast<long long>(h.tokens), static_cast<long long>(h.n_layer),
              static_cast<long long>(h.n_expert));
  for (int64_t l = 0; l < h.n_layer; ++l) {
    const int64_t* c = &h.counts[l * h.n_expert];
    const int64_t total = std::accumulate(c, c + h.n_expert, int64_t{0});
    const int64_t used = std::count_if(c, c + h.n_expert, [](int64_t v) { return v > 0; });
    std::printf("layer %3lld  %3lld used  ", static_cast<long long>(l),
                static_cast<long long>(used));
    std::vector<int64_t> order(static_cast<size_t>(h.n_expert));
    std::iota(order.begin(), order.end(), 0);
    if (h.n_expert > 16) {
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return c[a] > c[b]; });
      order.resize(8);
    }
    for (int64_t e : order)
      std::printf(" e%lld:%lld (%.1f%%)", static_cast<long long>(e), static_cast<long long>(c[e]),
                  total ? 100.0 * static_cast<double>(c[e]) / static_cast<double>(total) : 0.0);
    std::printf("\n");
  }
}

}  // namespace

int cmd_moe_stats(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"help"});
  a.allow_only({"help", "prompts", "json", "csv", "threads", "no-bos"});
  if (a.flag("help") || a.positional().size() != 1) {
    std::puts(
        "usage: kiln moe-stats MODEL.gguf --prompts FILE [--json HITS.json] [--csv HITS.csv]\n"
        "                      [--threads N]\n"
        "Runs each non-empty line of FILE as a prompt and counts, per layer and expert, the\n"
        "(token, slot) pairs the router sends there; prints the table and writes it as JSON\n"
        "(default expert-hits.json; the input of kiln prune-experts) and optionally CSV.");
    return a.flag("help") ? 0 : 2;
  }
  if (!a.has("prompts")) throw Error("--prompts FILE is required");
  RuntimeOptions ro;
  ro.threads = static_cast<int>(a.get_int("threads", 0));
  Runtime rt(ro);
  std::istringstream lines(read_file(a.get("prompts"), "prompt file"));
  std::vector<std::vector<int32_t>> prompts;
  int64_t longest = 0;
  std::string path = a.positional()[0];
  // The tokenizer first, to size the context for the longest prompt.
  {
    GgufFile f = open_model_file(path);
    std::unique_ptr<Tokenizer> t = Tokenizer::from_gguf(f);
    const Tokenizer& tok = *t;
    for (std::string line; std::getline(lines, line);) {
      if (line.empty()) continue;
      prompts.push_back(tok.encode(line, tok.add_bos_default() && tok.bos_id() >= 0));
      longest = std::max<int64_t>(longest, static_cast<int64_t>(prompts.back().size()));
    }
  }
  if (prompts.empty()) throw Error("prompt file '" + a.get("prompts") + "' has no prompts");
  Llm model(path, rt, longest);
  model.count_expert_hits();
  ExpertHits h;
  h.model = path;
  h.n_layer = model.config().n_layer;
  h.n_expert = model.config().n_expert;
  for (const auto& p : prompts) {
    model.reset();
    model.forward(p);
    h.tokens += static_cast<int64_t>(p.size());
  }
  for (int32_t v : model.expert_hits()) h.counts.push_back(v);
  print_hits(h);
  const std::string json = a.get("json", "expert-hits.json");
  write_file(json, h.to_json());
  std::printf("wrote %s\n", json.c_str());
  if (a.has("csv")) {
    write_file(a.get("csv"), h.to_csv());
    std::printf("wrote %s\n", a.get("csv").c_str());
  }
  return 0;
}

int cmd_prune_experts(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"help", "keep-router", "renorm"});
  a.allow_only({"help", "stats", "keep", "out", "keep-router", "renorm"});
  if (a.flag("help") || a.positional().size() != 1) {
    std::puts(
        "usage: kiln prune-experts MODEL.gguf --stats HITS.json --keep K -o PRUNED.gguf\n"
        "                          [--keep-router [--renorm]]\n"
        "Keeps the K experts of each layer with the most hits (kiln moe-stats; ties: the\n"
        "lower id) and writes a model with only those: expert tensors and router rows\n"
        "reduced, the old -> new expert ids in its metadata (kiln.expert_map). With\n"
        "--keep-router the router keeps every expert's row (a file only Kiln runs): a token\n"
        "routed to a pruned expert loses that share (weight 0), or with --renorm the\n"
        "remaining experts' weights are renormalised to sum to 1.");
    return a.flag("help") ? 0 : 2;
  }
  if (!a.has("stats") || !a.has("keep") || !a.has("out"))
    throw Error("--stats, --keep and -o are required");
  GgufFile in = open_model_file(a.positional()[0]);
  ExpertHits h = ExpertHits::from_json(read_file(a.get("stats"), "expert hits"), a.get("stats"));
  const std::string arch(in.get_string("general.architecture"));
  const int64_t n_layer = static_cast<int64_t>(in.get_u64(arch + ".block_count"));
  const auto n_expert = in.find_u64(arch + ".expert_count");
  if (!n_expert) in.fail("the model has no experts (no " + arch + ".expert_count)");
  if (h.n_layer != n_layer || h.n_expert != static_cast<int64_t>(*n_expert))
    throw Error("expert hits '" + a.get("stats") + "' are for " + std::to_string(h.n_layer) +
                " layers x " + std::to_string(h.n_expert) + " experts; the model has " +
                std::to_string(n_layer) + " x " + std::to_string(*n_expert));
  const int64_t k = a.get_int("keep", 0);
  auto keep = top_experts(h, k);
  const uint64_t before = in.size();
  if (a.flag("renorm") && !a.flag("keep-router"))
    throw Error("--renorm applies to --keep-router (a reduced router chooses kept experts only)");
  const uint64_t bytes =
      prune_experts(in, keep, a.get("out"), {a.flag("keep-router"), a.flag("renorm")});
  std::printf("wrote %s: %lld of %lld experts per layer, tensors %.1f MiB (file was %.1f MiB)\n",
              a.get("out").c_str(), static_cast<long long>(k), static_cast<long long>(*n_expert),
              static_cast<double>(bytes) / (1 << 20), static_cast<double>(before) / (1 << 20));
  return 0;
}

}  // namespace kiln
