// `kiln tokenize`: a model's tokenizer on a text, as ids; or a conversation
// laid out by its chat template (models/chat_template.h), as text or ids.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "ir/error.h"
#include "models/chat_template.h"
#include "models/hf_checkpoint.h"
#include "models/read_file.h"
#include "models/tokenizer.h"
#include "tools/cli.h"

namespace kiln {

namespace {

// The messages of a JSON list of {"role": ..., "content": ...}.
std::vector<ChatMessage> read_messages(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path, "chat file"));
  } catch (const nlohmann::json::exception& e) {
    throw Error("chat file '" + path + "': " + e.what());
  }
  std::vector<ChatMessage> out;
  for (const auto& m : j.is_array() ? j : nlohmann::json::array({nullptr})) {
    if (!m.is_object() || !m.value("role", nlohmann::json()).is_string() ||
        !m.value("content", nlohmann::json()).is_string())
      throw Error("chat file '" + path + "': not a list of {\"role\": ..., \"content\": ...}");
    out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return out;
}

}  // namespace

int cmd_tokenize(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"help", "no-bos", "pieces", "render", "no-generation-prompt"});
  a.allow_only({"help", "model", "prompt", "file", "no-bos", "pieces", "chat", "template", "render",
                "no-generation-prompt"});
  const int inputs = a.has("prompt") + a.has("file") + a.has("chat");
  const bool model_free = a.has("chat") && a.flag("render") && a.has("template");
  if (a.flag("help") || inputs != 1 || (!a.has("model") && !model_free)) {
    std::puts(
        "usage: kiln tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--pieces]\n"
        "       kiln tokenize [-m MODEL] --chat MESSAGES.json [--template NAME|FILE] [--render]\n"
        "                     [--no-generation-prompt]\n"
        "Prints the ids the model's tokenizer gives the text, space-separated (BOS first when\n"
        "the model adds one, unless --no-bos); --pieces prints each id's text instead, one per\n"
        "line. MODEL: a GGUF file (a vocabulary-only one will do) or a Hugging Face folder.\n"
        "--chat lays out a conversation (a JSON list of {\"role\", \"content\"}) as the model's\n"
        "chat template (or --template: a family such as chatml, llama3, gemma, or a file\n"
        "holding a template's text) does, the assistant's turn opened, and tokenizes it with\n"
        "the template's special tokens as such; --render prints the text instead (no model\n"
        "needed with --template).");
    return a.flag("help") ? 0 : 2;
  }
  std::string text;
  std::optional<GgufFile> f;
  if (a.has("model")) f.emplace(open_model_file(a.get("model")));
  if (a.has("chat")) {
    std::string tmpl = a.has("template") ? chat_template_option(a.get("template")) : "";
    if (tmpl.empty()) {
      auto t = f->find_string("tokenizer.chat_template");
      if (!t)
        throw Error("model '" + a.get("model") +
                    "' has no tokenizer.chat_template; pass --template");
      tmpl = std::string(*t);
    }
    text = apply_chat_template(chat_template_family(tmpl), read_messages(a.get("chat")),
                               !a.flag("no-generation-prompt"));
    if (a.flag("render")) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      return 0;
    }
  } else {
    text = a.has("file") ? read_file(a.get("file"), "text file") : a.get("prompt");
  }
  std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(*f);
  const bool bos = !a.flag("no-bos") && tok->add_bos_default() && tok->bos_id() >= 0;
  std::vector<int32_t> ids = tok->encode(text, bos, a.has("chat"));
  if (a.flag("pieces")) {
    for (int32_t id : ids) std::printf("%d\t%s\n", id, tok->token_to_piece(id, true).c_str());
    return 0;
  }
  for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
  std::printf("\n");
  return 0;
}

}  // namespace kiln
