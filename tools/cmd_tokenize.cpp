// `kiln tokenize`: a model's tokenizer on a text, as ids.
#include <cstdio>

#include "ir/error.h"
#include "models/hf_checkpoint.h"
#include "models/read_file.h"
#include "models/tokenizer.h"
#include "tools/cli.h"

namespace kiln {

int cmd_tokenize(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"help", "no-bos", "pieces"});
  a.allow_only({"help", "model", "prompt", "file", "no-bos", "pieces"});
  if (a.flag("help") || !a.has("model") || a.has("prompt") == a.has("file")) {
    std::puts(
        "usage: kiln tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--pieces]\n"
        "Prints the ids the model's tokenizer gives the text, space-separated (BOS first when\n"
        "the model adds one, unless --no-bos); --pieces prints each id's text instead, one per\n"
        "line. MODEL: a GGUF file (a vocabulary-only one will do) or a Hugging Face folder.");
    return a.flag("help") ? 0 : 2;
  }
  const std::string text = a.has("file") ? read_file(a.get("file"), "text file") : a.get("prompt");
  GgufFile f = open_model_file(a.get("model"));
  std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(f);
  const bool bos = !a.flag("no-bos") && tok->add_bos_default() && tok->bos_id() >= 0;
  std::vector<int32_t> ids = tok->encode(text, bos);
  if (a.flag("pieces")) {
    for (int32_t id : ids) std::printf("%d\t%s\n", id, tok->token_to_piece(id, true).c_str());
    return 0;
  }
  for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
  std::printf("\n");
  return 0;
}

}  // namespace kiln
