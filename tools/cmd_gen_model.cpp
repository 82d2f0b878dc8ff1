// `kiln gen-model`: writes a random-weight GGUF model of a real architecture
// (each one's presets are in its description, models/arch/) that Kiln and
// llama.cpp both load, at a named size, in f32, f16, q8_0, q4_0, q4_1, q5_0,
// q5_1, or llama-quantize's q2_k, q3_k_m, q4_k_m, q5_k_m, iq4_nl and iq4_xs
// mixes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "ir/error.h"
#include "models/model_generator.h"
#include "models/model_presets.h"
#include "tools/cli.h"

namespace kiln {

namespace {

void print_presets() {
  std::printf("%-10s %-15s %-9s %6s %6s %5s %6s %8s %6s %8s\n", "--arch", "--preset", "arch",
              "embd", "layers", "heads", "kv", "head_dim", "ff", "experts");
  for (const ModelPreset& p : model_presets()) {
    std::string experts = p.moe()
                              ? std::to_string(p.n_expert_used) + "/" + std::to_string(p.n_expert) +
                                    "x" + std::to_string(p.expert_ff())
                              : "-";
    std::printf("%-10s %-15s %-9s %6lld %6lld %5lld %6lld %8lld %6lld %8s\n", p.family.c_str(),
                p.preset.c_str(), p.arch.c_str(), static_cast<long long>(p.n_embd),
                static_cast<long long>(p.n_layer), static_cast<long long>(p.n_head),
                static_cast<long long>(p.n_head_kv), static_cast<long long>(p.head_dim),
                static_cast<long long>(p.n_ff), experts.c_str());
  }
}

std::string output_path(const CliArgs& a) {
  const std::vector<std::string>& pos = a.positional();
  if (!pos.empty())
    throw Error("unexpected argument '" + pos[0] + "' (the output file is given with -o FILE)");
  if (a.has("out")) return a.get("out");
  throw Error("no output file (give -o OUT.gguf)");
}

}  // namespace

int cmd_gen_model(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"help", "list", "tie-embeddings"});
  a.allow_only({"help", "list", "tie-embeddings", "arch", "preset", "out", "type", "vocab", "seed",
                "layers", "ctx", "window", "threads"});
  if (a.flag("help")) {
    std::puts(
        "usage: kiln gen-model --arch ARCH --preset NAME -o OUT.gguf [--type f16]\n"
        "                      [--vocab VOCAB.gguf] [--seed 0] [--layers N] [--ctx N] [--window "
        "N]\n"
        "                      [--threads N] [--tie-embeddings]\n"
        "       kiln gen-model --list\n"
        "Writes a GGUF model with random weights (normal, std 0.02; norms 1) and llama.cpp's\n"
        "tensor names, shapes and metadata, loadable by Kiln and llama.cpp.\n"
        "  --arch    an architecture (see --list; llama-moe is Mixtral-style llama)\n"
        "  --preset  a size of that architecture (see --list)\n"
        "  --type    f32 | f16 | q8_0 | q4_0 | q4_1 | q5_0 | q5_1, or llama-quantize's mixes\n"
        "            q2_k | q3_k_m | q4_k_m | q5_k_m | iq4_nl | iq4_xs (with some wider tensors, "
        "and\n"
        "            32-weight fallbacks for rows off 256)\n"
        "  --vocab   copy the tokenizer.* keys of this GGUF (and its vocabulary size);\n"
        "            default: a byte-level BPE vocabulary, padded to the preset's size\n"
        "  --seed    the same seed writes the same bytes, on any thread count\n"
        "  --layers, --ctx  override the preset's block count and context length\n"
        "  --window  override the sliding window of an architecture that has one\n"
        "  --tie-embeddings  no output.weight: the output reuses token_embd");
    return 0;
  }
  if (a.flag("list")) {
    print_presets();
    return 0;
  }
  if (!a.has("arch") || !a.has("preset"))
    throw Error("--arch and --preset are required (see `kiln gen-model --list`)");
  ModelPreset p = find_model_preset(a.get("arch"), a.get("preset"));
  if (a.has("layers")) {
    p.n_layer = a.get_int("layers", 0);
    if (p.n_layer <= 0) throw Error("--layers must be positive");
  }
  if (a.has("ctx")) {
    p.n_ctx = a.get_int("ctx", 0);
    if (p.n_ctx <= 0) throw Error("--ctx must be positive");
  }
  if (a.has("window")) {
    if (!p.sliding_window)
      throw Error("--window: architecture '" + p.arch + "' has no sliding window");
    p.sliding_window = a.get_int("window", 0);
    if (p.sliding_window <= 0) throw Error("--window must be positive");
  }
  if (a.flag("tie-embeddings")) p.tied_embeddings = true;
  GenModelOptions o;
  o.format = parse_weight_format(a.get("type", "f16"));
  o.vocab_path = a.get("vocab");
  int64_t seed = a.get_int("seed", 0);
  if (seed < 0) throw Error("--seed must not be negative");
  o.seed = static_cast<uint64_t>(seed);
  o.threads = static_cast<int>(a.get_int("threads", 0));
  if (o.threads < 0) throw Error("--threads must not be negative");
  if (o.threads == 0)
    o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string out = output_path(a);

  auto t0 = std::chrono::steady_clock::now();
  GenModelSummary s = generate_model(p, o, out);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::map<std::string, int> by_type;
  for (const PlannedTensor& t : s.tensors) ++by_type[tensor_type_name(t.type)];
  std::string types;
  for (const auto& [name, n] : by_type)
    types += (types.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  std::printf("wrote %s: %s/%s (arch %s), %s, %lld layers, vocab %lld\n", out.c_str(),
              p.family.c_str(), p.preset.c_str(), p.arch.c_str(),
              std::string(weight_format_name(o.format)).c_str(), static_cast<long long>(p.n_layer),
              static_cast<long long>(s.n_vocab));
  std::printf("         %.3f B parameters, %zu tensors (%s), %.1f MiB in %.1f s on %d thread(s)\n",
              static_cast<double>(s.params) / 1e9, s.tensors.size(), types.c_str(),
              static_cast<double>(s.file_bytes) / (1 << 20), secs, o.threads);
  // Type substitutions, one line per reason, in file order.
  std::vector<std::pair<std::string, std::vector<std::string>>> notes;
  for (const PlannedTensor& t : s.tensors) {
    if (t.note.empty()) continue;
    auto it =
        std::find_if(notes.begin(), notes.end(), [&](const auto& n) { return n.first == t.note; });
    if (it == notes.end()) it = notes.insert(notes.end(), {t.note, {}});
    it->second.push_back(t.name);
  }
  for (const auto& [note, names] : notes) {
    std::string list = names[0];
    if (names.size() > 1) list += ", " + names[1];
    if (names.size() > 2) list += " and " + std::to_string(names.size() - 2) + " more";
    std::printf("note     %s: %s\n", list.c_str(), note.c_str());
  }
  return 0;
}

}  // namespace kiln
