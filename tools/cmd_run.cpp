// `kiln run`: the main job. Loads a GGUF model, tokenizes the prompt (or
// takes token ids), generates with the chosen sampler while streaming the
// text, and ends with one JSON line of metrics (speeds, latency
// percentiles, peak RSS, JIT time, cache hits, kernels per token).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <list>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ir/error.h"
#include "kernels/attention/kv_cache.h"
#include "models/generation.h"
#include "models/model_generator.h"
#include "models/npy.h"
#include "models/speculative.h"
#include "runtime/compile_cache.h"
#include "tools/cli.h"

namespace kiln {

namespace {

// Peak resident set (VmHWM) in MiB, from /proc/self/status.
double peak_rss_mib() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

// What the same context takes as Kiln's f16 cache (K and V, every layer,
// K padded to whole key blocks): the base of the metrics' kv_saved_mib.
size_t f16_cache_bytes(const Llm& m, int64_t key_block) {
  const ModelConfig& c = m.config();
  return static_cast<size_t>(2 * c.n_layer *
                             (k_cache_elems(m.n_ctx(), c.n_head_kv, c.head_dim, key_block) +
                              v_cache_elems(m.n_ctx(), c.n_head_kv, c.head_dim)));
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

// The main job's model when none is given: a small generated llama (Q4_K_M,
// byte-level vocabulary), written once next to the compile cache.
std::string default_model() {
  namespace fs = std::filesystem;
  std::string root = CompileCache::default_dir();
  fs::path dir = root.empty() ? fs::temp_directory_path() / "kiln" : fs::path(root);
  fs::path path = dir / "models" / "llama-tiny-q4_k_m.gguf";
  if (!fs::exists(path)) {
    fs::create_directories(path.parent_path());
    std::fprintf(stderr,
                 "kiln run: no -m given; generating the default model %s\n"
                 "          (= kiln gen-model --arch llama --preset tiny --type q4_k_m)\n",
                 path.c_str());
    GenModelOptions o;
    o.format = WeightFormat::q4_k_m;
    o.seed = 1;
    generate_model(find_model_preset("llama", "tiny"), o, path.string());
  }
  return path.string();
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) continue;
    out += ch;
  }
  return out;
}

std::vector<int32_t> parse_tokens(const std::string& s) {
  std::vector<int32_t> ids;
  for (int64_t id : parse_int_list(s, "--tokens")) ids.push_back(static_cast<int32_t>(id));
  return ids;
}

// The prompt's activations into dir: NAME.npy each (2-D: rows, then the
// rest), and activations.json with the model, tokens and names in order.
void dump_activations(Llm& model, const std::vector<int32_t>& prompt, const std::string& dir) {
  const std::list<DumpedTensor> dump = model.activations(prompt, [&](size_t bytes) {
    const std::filesystem::space_info sp = std::filesystem::space(dir);
    if (bytes > sp.available)
      throw Error("--dump-activations " + dir + ": the dump takes " + std::to_string(bytes >> 20) +
                  " MiB and the disk has " + std::to_string(sp.available >> 20) + " MiB free");
  });
  nlohmann::json names = nlohmann::json::array(), shapes = nlohmann::json::object();
  for (const DumpedTensor& d : dump) {
    write_npy(dir + "/" + d.name + ".npy", d.data, d.shape.back());
    names.push_back(d.name);
    shapes[d.name] = d.shape;
  }
  const nlohmann::json manifest = {
      {"model", model.config().arch}, {"tokens", prompt}, {"tensors", names}, {"shapes", shapes}};
  std::ofstream(dir + "/activations.json") << manifest.dump(1) << "\n";
}

}  // namespace

int cmd_run(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"help", "profile", "ignore-eos", "no-bos", "check", "draft-k-fixed"});
  a.allow_only({"help",
                "profile",
                "check",
                "ignore-eos",
                "no-bos",
                "model",
                "prompt",
                "n-predict",
                "threads",
                "seed",
                "temp",
                "top-k",
                "top-p",
                "repeat-penalty",
                "stop",
                "tokens",
                "logits-out",
                "embd-out",
                "ctx",
                "kv",
                "kv-page",
                "device",
                "presence-penalty",
                "frequency-penalty",
                "draft",
                "draft-k",
                "draft-k-fixed",
                "spec",
                "trace",
                "dump-activations"});
  if (a.flag("help")) {
    std::puts(
        "usage: kiln run [-m MODEL.gguf|HF_DIR] [-p PROMPT | --tokens 1,2,3] [-n 64] [--threads "
        "N]\n"
        "                [--temp 0] [--top-k 40] [--top-p 0.95] [--repeat-penalty 1.0] "
        "[--seed 0]\n"
        "                [--presence-penalty 0] [--frequency-penalty 0]\n"
        "                [--stop STR]... [--ignore-eos] [--no-bos] [--ctx N]\n"
        "                [--kv f16|bf16|f32|q8_0|aura4v4|aura8v4|...] [--kv-page N]\n"
        "                [--logits-out FILE.npy] [--embd-out FILE.npy] "
        "[--profile]\n"
        "                [--device cpu|cuda|cuda-sim] [--check]\n"
        "                [--draft DRAFT.gguf|HF_DIR | --spec ngram[:N]] [--draft-k 4] "
        "[--draft-k-fixed]\n"
        "Streams the generated text, then prints one JSON line of metrics. -m takes a GGUF file\n"
        "or a Hugging Face folder (config.json, tokenizer.json, safetensors). Without -m, runs a\n"
        "small generated llama (written once under the cache directory). --device cuda-sim runs\n"
        "the CUDA kernels on the CPU simulator: a correctness check, slow. --check runs every\n"
        "launch through the interpreter too and stops at the first kernel whose result differs\n"
        "(cpu, cuda-sim). --kv sets the KV\n"
        "cache's element type (f16 as llama.cpp's default; q8_0 as llama.cpp's -ctk/-ctv q8_0;\n"
        "aura<K bits>v<V bits>, bits 2/3/4/8: AURA's rotated Lloyd-Max codes, and with\n"
        "KILN_AURA_AUTO_ASYM=1 K at 8 bits for GQA groups of 6 or more); "
        "--kv-page N keeps it in a pool of\n"
        "pages of N rows addressed through a block table (a multiple of the key block).\n"
        "--logits-out writes every position's logits; --embd-out the prompt's final hidden\n"
        "states (after the final norm, what an embedding pools), from a forward of their own.\n"
        "--trace writes a timeline (Chrome trace / Perfetto JSON: every forward and kernel\n"
        "launch with its spec, grid and bytes, timed to completion); --profile prints the same\n"
        "spans summed per plan step. --dump-activations writes the prompt's activations per\n"
        "layer (roped Q/K, attention and FFN outputs, the residual stream; final norm, logits)\n"
        "as DIR/NAME.npy under llama.cpp's tensor names, with DIR/activations.json listing them\n"
        "in order (compare two dumps with tools/diff_activations.py).\n"
        "Speculative decoding: --draft takes a smaller model of the same vocabulary, --spec\n"
        "ngram[:N] guesses from the last N-gram's (default 3) earlier occurrence; up to --draft-k\n"
        "guesses (1 to 16) a step, fewer as the measured acceptance says (--draft-k-fixed: always\n"
        "K), verified in one forward. Greedy output is the same tokens, sampled output the same\n"
        "distribution as without.");
    return 0;
  }
  // Checked before the model loads: a run should not end on a path it
  // cannot write.
  if (a.has("trace")) check_writable_file(a.get("trace"), "--trace");
  if (a.has("dump-activations"))
    check_writable_dir(a.get("dump-activations"), "--dump-activations");
  RuntimeOptions ro;
  ro.threads = static_cast<int>(a.get_int("threads", 0));
  ro.backend = a.get("device", "cpu");
  ro.check = a.flag("check");
  auto t_start = std::chrono::steady_clock::now();
  std::unique_ptr<Runtime> runtime;
  try {
    runtime = std::make_unique<Runtime>(ro);  // one line saying why a GPU cannot be had
  } catch (const Error& e) {
    throw Error(std::string("--device ") + ro.backend + ": " + e.what());
  }
  Runtime& rt = *runtime;
  std::string model_path = a.has("model") ? a.get("model") : default_model();
  Llm model(model_path, rt, a.get_int("ctx", 0), parse_kv_type(a.get("kv", "f16")),
            a.get_int("kv-page", 0));
  GenerationOptions o;
  o.n_predict = a.get_int("n-predict", 64);
  if (o.n_predict < 0) throw Error("-n expects a count >= 0");
  o.sampler.temperature = parse_double(a.get("temp", "0"), "--temp");
  o.sampler.top_k = a.get_int("top-k", 40);
  o.sampler.top_p = parse_double(a.get("top-p", "0.95"), "--top-p");
  o.sampler.repeat_penalty = parse_double(a.get("repeat-penalty", "1.0"), "--repeat-penalty");
  o.sampler.presence_penalty = parse_double(a.get("presence-penalty", "0"), "--presence-penalty");
  o.sampler.frequency_penalty =
      parse_double(a.get("frequency-penalty", "0"), "--frequency-penalty");
  o.sampler.seed = static_cast<uint64_t>(a.get_int("seed", 0));
  o.stop = a.all("stop");
  o.stop_at_eos = !a.flag("ignore-eos");
  o.all_logits = a.has("logits-out");
  std::unique_ptr<Trace> trace;
  if (a.has("trace") || a.flag("profile")) trace = std::make_unique<Trace>();
  model.trace(trace.get());
  // Speculative decoding: a draft model beside the target, or prompt lookup.
  const SpecArgs spec = parse_spec_args(a);
  std::unique_ptr<Llm> draft_model;
  std::unique_ptr<Drafter> drafter;
  if (!spec.draft.empty()) {
    draft_model = std::make_unique<Llm>(spec.draft, rt, model.n_ctx(), model.kv_type());
    draft_model->trace(trace.get());
    check_draft_vocab(model.tokenizer(), draft_model->tokenizer());
    if (std::string w = draft_size_warning(model, *draft_model); !w.empty())
      std::fprintf(stderr, "%s\n", w.c_str());
    drafter = std::make_unique<DraftModel>(*draft_model, o.sampler);
  } else if (!spec.spec.empty()) {
    drafter = make_spec_drafter(spec.spec);
  }
  o.drafter = drafter.get();
  o.draft_k = spec.k;
  o.draft_k_fixed = spec.fixed;
  std::vector<int32_t> prompt;
  if (a.has("tokens")) {
    prompt = parse_tokens(a.get("tokens"));
  } else {
    std::string text = a.get("prompt", "Once upon a time");
    bool bos =
        !a.flag("no-bos") && model.tokenizer().add_bos_default() && model.tokenizer().bos_id() >= 0;
    prompt = model.tokenizer().encode(text, bos);
    std::fputs(text.c_str(), stdout);
  }
  if (a.has("dump-activations")) {
    if (prompt.empty()) throw Error("--dump-activations: the prompt has no tokens");
    dump_activations(model, prompt, a.get("dump-activations"));
    model.reset();
  }
  if (a.has("embd-out")) {
    if (prompt.empty()) throw Error("--embd-out: the prompt has no tokens");
    write_npy(a.get("embd-out"), model.hidden_states(prompt), model.config().n_embd);
    model.reset();
  }
  GenerationResult r = generate(model, prompt, o, [](const std::string& piece) {
    std::fputs(piece.c_str(), stdout);
    std::fflush(stdout);
  });
  std::puts("");
  if (o.all_logits) write_npy(a.get("logits-out"), r.logits, model.config().n_vocab);
  if (a.has("trace")) trace->write(a.get("trace"));
  if (a.flag("profile")) {
    const std::vector<ProfileRow> rows = profile_rows(trace->events());
    double total = 0;
    for (const ProfileRow& r : rows) total += r.ms;
    std::fprintf(stderr, "%-20s %10s %8s %7s\n", "step", "ms", "calls", "share");
    for (const ProfileRow& r : rows)
      std::fprintf(stderr, "%-20s %10.3f %8lld %6.1f%%\n", r.label.c_str(), r.ms,
                   static_cast<long long>(r.calls), 100 * r.ms / total);
    auto [planned, unplanned] =
        model.scratch_bytes(static_cast<int64_t>(r.prompt.size()), o.all_logits);
    std::fprintf(stderr, "prefill scratch: %.1f MiB planned by liveness (%.1f MiB unshared)\n",
                 planned / 1048576.0, unplanned / 1048576.0);
  }
  double decode_ms = 0;
  for (double v : r.token_ms) decode_ms += v;
  Runtime::CompileStats cs = rt.compile_stats();
  const Llm::MemoryUse mem = model.memory();
  double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
  std::printf(
      "{\"model\": \"%s\", \"arch\": \"%s\", \"device\": \"%s\", \"threads\": %d, "
      "\"ctx\": %lld, \"kv\": \"%s\", \"kv_cache_mib\": %.1f, \"kv_saved_mib\": %.1f, "
      "\"prompt_tokens\": %zu, "
      "\"generated_tokens\": %zu, \"prefill_tok_s\": %.2f, \"decode_tok_s\": %.2f, "
      "\"token_latency_ms_p50\": %.3f, \"token_latency_ms_p95\": %.3f, \"peak_rss_mib\": %.1f, "
      "\"jit_compile_ms\": %.1f, \"jit_compile_wall_ms\": %.1f, \"kernels_compiled\": %lld, "
      "\"cache_hits\": %d, "
      "\"cache_misses\": %d, \"kernels_per_token\": %lld, \"stop\": \"%s\", \"spec\": \"%s\", "
      "\"spec_steps\": %lld, \"draft_tokens\": %lld, \"accepted_tokens\": %lld, "
      "\"acceptance_rate\": %.4f, \"mean_accepted_len\": %.3f, \"draft_ms\": %.1f, "
      "\"verify_ms\": %.1f, \"spec_predicted_speedup\": %.3f, \"weights_mib\": %.1f, "
      "\"weight_copies_mib\": %.1f, \"scratch_mib\": %.1f, \"wall_ms\": %.1f}\n",
      json_escape(model_path).c_str(), model.config().arch.c_str(), rt.backend().name().c_str(),
      rt.threads(), static_cast<long long>(model.n_ctx()),
      kv_cache_type_name(model.kv_type()).c_str(), model.kv_cache_bytes() / 1048576.0,
      (static_cast<double>(f16_cache_bytes(model, kv_key_block(rt.backend().target_desc()))) -
       static_cast<double>(model.kv_cache_bytes())) /
          1048576.0,
      r.prompt.size(), r.generated.size(), r.prompt.size() / (r.prefill_ms / 1e3),
      r.token_ms.empty() ? 0.0 : r.token_ms.size() / (decode_ms / 1e3), percentile(r.token_ms, 0.5),
      percentile(r.token_ms, 0.95), peak_rss_mib(), cs.ms, cs.wall_ms,
      static_cast<long long>(cs.kernels), rt.cache().hits.load(), rt.cache().misses.load(),
      static_cast<long long>(r.launches_per_token), r.stop_reason.c_str(),
      drafter ? drafter->name().c_str() : "none", static_cast<long long>(r.spec.steps),
      static_cast<long long>(r.spec.draft_tokens), static_cast<long long>(r.spec.accepted_tokens),
      r.spec.acceptance_rate(), r.spec.mean_accepted_length(), r.draft_ms, r.verify_ms,
      r.spec_predicted_speedup, mem.weights / 1048576.0, mem.weight_copies / 1048576.0,
      mem.scratch / 1048576.0, wall_ms);
  return 0;
}

}  // namespace kiln
