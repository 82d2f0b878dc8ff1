// `kiln convert`: a Hugging Face folder written as a GGUF file.
#include <cstdio>

#include "ir/error.h"
#include "models/hf_checkpoint.h"
#include "tools/cli.h"

namespace kiln {

int cmd_convert(const std::vector<std::string>& argv_in) {
  std::vector<std::string> argv;
  for (const auto& s : argv_in) argv.push_back(s == "-o" ? "--out" : s);
  CliArgs a(argv, {"help"});
  a.allow_only({"help", "out"});
  if (a.flag("help") || a.positional().size() != 1) {
    std::puts(
        "usage: kiln convert HF_DIR -o OUT.gguf\n"
        "Writes the Hugging Face folder HF_DIR (config.json, tokenizer.json, model.safetensors\n"
        "or its shards) as a GGUF file, as llama.cpp's converter would: the same metadata and\n"
        "tensor names, llama's q/k rows in GGUF's order, norms in F32, experts stacked. Weights\n"
        "keep their type (F32, F16, BF16). `kiln run -m HF_DIR` reads the folder directly.");
    return a.flag("help") ? 0 : 2;
  }
  if (!a.has("out")) throw Error("-o OUT.gguf is required");
  const std::string dir = a.positional()[0];
  if (!is_hf_checkpoint(dir))
    throw Error("'" + dir + "' is not a Hugging Face folder (a directory with config.json)");
  auto ck = HfCheckpoint::open(dir);
  ck->gguf().write(a.get("out"));
  std::printf("wrote %s\n", a.get("out").c_str());
  return 0;
}

}  // namespace kiln
