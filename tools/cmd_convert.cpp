// `kiln convert`: a Hugging Face folder written as a GGUF file.
#include <cstdio>

#include "ir/error.h"
#include "models/gguf_quantize.h"
#include "models/hf_checkpoint.h"
#include "tools/cli.h"

namespace kiln {

int cmd_convert(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"help"});
  a.allow_only({"help", "out", "type", "threads"});
  if (a.flag("help") || a.positional().size() != 1) {
    std::puts(
        "usage: kiln convert HF_DIR -o OUT.gguf [--type q8_0|q4_k_m|...] [--threads N]\n"
        "Writes the Hugging Face folder HF_DIR (config.json, tokenizer.json, model.safetensors\n"
        "or its shards) as a GGUF file, as llama.cpp's converter would: the same metadata and\n"
        "tensor names, llama's q/k rows in GGUF's order, norms in F32, experts stacked. Weights\n"
        "keep their type (F32, F16, BF16, GPT-OSS's MXFP4; block-scaled FP8 and INT8 are\n"
        "dequantized to BF16, AWQ to F16) unless --type quantizes them as llama-quantize's mix\n"
        "of that name does (f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k_m, q4_k_m,\n"
        "q5_k_m, iq4_nl, iq4_xs); HF_DIR may then also be a GGUF file with float weights.\n"
        "`kiln run -m HF_DIR` reads a folder directly.");
    return a.flag("help") ? 0 : 2;
  }
  if (!a.has("out")) throw Error("-o OUT.gguf is required");
  const std::string model = a.positional()[0];
  if (a.has("type")) {
    quantize_gguf(open_model_file(model, HfWeights::dequantized),
                  parse_weight_format(a.get("type")), a.get("out"),
                  static_cast<int>(a.get_int("threads", 0)));
  } else {
    if (!is_hf_checkpoint(model))
      throw Error("'" + model + "' is not a Hugging Face folder (a directory with config.json)");
    HfCheckpoint::open(model, HfWeights::dequantized)->gguf().write(a.get("out"));
  }
  std::printf("wrote %s\n", a.get("out").c_str());
  return 0;
}

}  // namespace kiln
