// `kiln`: run, inspect and benchmark Kiln kernels.
#include <cstdio>
#include <string>
#include <vector>

#include "ir/error.h"
#include "tools/cli.h"

namespace {

void usage() {
  std::puts(
      "usage: kiln <command> [options]\n"
      "\n"
      "commands:\n"
      "  run      run a model (GGUF file or Hugging Face folder): prompt in, generated text and\n"
      "           a JSON line of metrics out\n"
      "  inspect  show a kernel's IR, LLVM IR or assembly for a CPU target\n"
      "  bench    benchmark kernels against the measured memory bandwidth (Google Benchmark)\n"
      "  list     list the library kernels with their dtypes and constexprs\n"
      "  tune     search a kernel's block sizes for a shape and record the winner\n"
      "  cache    show or clear the on-disk compile cache (stats, list, clear)\n"
      "  gen-model  write a random-weight GGUF model (llama, qwen2, qwen3, qwen3moe, llama-moe,\n"
      "             gemma3, gpt-oss)\n"
      "  moe-stats  count the tokens an MoE model routes to each expert over a prompt file\n"
      "  prune-experts  write an MoE model with only the most used experts of each layer\n"
      "  convert  write a Hugging Face folder (safetensors) as a GGUF file\n"
      "  tokenize a model's token ids for a text\n"
      "  kld      KL divergence of a run with another KV cache (AURA, q8_0) from a base run\n"
      "  serve    an OpenAI-compatible HTTP server (/v1/completions, streaming) over a model\n"
      "  grammar  compile a grammar (GBNF, JSON schema) against a vocabulary: sample or time it\n"
      "\n"
      "`kiln <command> --help` describes a command's options.");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    usage();
    return args.empty() ? 2 : 0;
  }
  std::string cmd = args[0];
  args.erase(args.begin());
  try {
    if (cmd == "run") return kiln::cmd_run(args);
    if (cmd == "inspect") return kiln::cmd_inspect(args);
    if (cmd == "bench") return kiln::cmd_bench(args);
    if (cmd == "list") return kiln::cmd_list(args);
    if (cmd == "cache") return kiln::cmd_cache(args);
    if (cmd == "tune") return kiln::cmd_tune(args);
    if (cmd == "gen-model") return kiln::cmd_gen_model(args);
    if (cmd == "moe-stats") return kiln::cmd_moe_stats(args);
    if (cmd == "prune-experts") return kiln::cmd_prune_experts(args);
    if (cmd == "kld") return kiln::cmd_kld(args);
    if (cmd == "convert") return kiln::cmd_convert(args);
    if (cmd == "tokenize") return kiln::cmd_tokenize(args);
    if (cmd == "serve") return kiln::cmd_serve(args);
    if (cmd == "grammar") return kiln::cmd_grammar(args);
    std::fprintf(stderr, "kiln: error: unknown command '%s' (run `kiln --help`)\n", cmd.c_str());
    return 2;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
