// `kiln tokenize`: a model's tokenizer on a text, as ids; or a conversation
// laid out by its chat template (models/chat_template.h), as text or ids.
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "ir/error.h"
#include "models/chat_template.h"
#include "models/hf_checkpoint.h"
#include "models/read_file.h"
#include "models/tokenizer.h"
#include "tools/cli.h"

namespace kiln {

namespace {

nlohmann::ordered_json read_json(const std::string& path, const std::string& what) {
  try {
    return nlohmann::ordered_json::parse(read_file(path, what));
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + " '" + path + "': " + e.what());
  }
}

// A family layout's messages: {"role": ..., "content": "..."} only.
std::vector<ChatMessage> family_messages(const nlohmann::ordered_json& j, const std::string& path) {
  std::vector<ChatMessage> out;
  for (const auto& m : j.is_array() ? j : nlohmann::ordered_json::array({nullptr})) {
    if (!m.is_object() || !m.value("role", nlohmann::ordered_json()).is_string() ||
        !m.value("content", nlohmann::ordered_json()).is_string())
      throw Error("chat file '" + path +
                  "': a family layout takes a list of {\"role\": ..., \"content\": \"...\"}");
    out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return out;
}

// --now "YYYY-MM-DD" or "YYYY-MM-DD HH:MM:SS": the time strftime_now() formats.
std::tm parse_now(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
  if (!end || *end) {
    tm = std::tm{};
    end = strptime(text.c_str(), "%Y-%m-%d", &tm);
  }
  if (!end || *end)
    throw Error("--now expects YYYY-MM-DD or 'YYYY-MM-DD HH:MM:SS', got '" + text + "'");
  std::tm copy = tm;
  timegm(&copy);  // fills the weekday and day of the year
  tm.tm_wday = copy.tm_wday;
  tm.tm_yday = copy.tm_yday;
  return tm;
}

}  // namespace

int cmd_tokenize(const std::vector<std::string>& argv) {
  CliArgs a(argv, {"help", "no-bos", "pieces", "render", "no-generation-prompt", "eog"});
  a.allow_only({"help", "model", "prompt", "file", "jsonl", "eog", "no-bos", "pieces", "chat",
                "template", "render", "no-generation-prompt", "tools", "bos", "eos",
                "template-kwargs", "now"});
  const int inputs =
      a.has("prompt") + a.has("file") + a.has("chat") + a.has("jsonl") + a.flag("eog");
  const bool model_free = a.has("chat") && a.flag("render") && a.has("template");
  if (a.flag("help") || inputs != 1 || (!a.has("model") && !model_free)) {
    std::puts(
        "usage: kiln tokenize -m MODEL (-p TEXT | -f FILE | --jsonl FILE | --eog) [--no-bos] "
        "[--pieces]\n"
        "       kiln tokenize [-m MODEL] --chat MESSAGES.json [--template NAME|FILE] [--render]\n"
        "                     [--tools TOOLS.json] [--bos TEXT] [--eos TEXT]\n"
        "                     [--template-kwargs JSON] [--now 'YYYY-MM-DD HH:MM:SS']\n"
        "                     [--no-generation-prompt]\n"
        "Prints the ids the model's tokenizer gives the text, space-separated (BOS first when\n"
        "the model adds one, unless --no-bos); --pieces prints each id's text instead, one per\n"
        "line. --jsonl FILE holds one text per line as a JSON string: a line of ids each.\n"
        "--eog prints the ids that end a generation (EOS, end-of-turn tokens), as llama.cpp\n"
        "counts them.\n"
        "MODEL: a GGUF file (a vocabulary-only one will do) or a Hugging Face folder.\n"
        "--chat lays out a conversation (an OpenAI-style JSON list of messages: roles,\n"
        "contents, tool_calls, tool results) with the model's chat template, or --template: a\n"
        "file holding a Jinja template, rendered as transformers renders it (with --tools, the\n"
        "tools list; --bos/--eos, the special tokens, else the model's; --template-kwargs, more\n"
        "variables such as {\"enable_thinking\": false}; --now, strftime_now's clock), or a\n"
        "family layout such as chatml, llama3, gemma (role and string content only). The\n"
        "assistant's turn is opened unless --no-generation-prompt. The text is tokenized with\n"
        "its special tokens as such (a rendered template writes its own BOS); --render prints\n"
        "the text instead (no model needed with --template).");
    return a.flag("help") ? 0 : 2;
  }
  std::string text;
  std::optional<GgufFile> f;
  std::unique_ptr<Tokenizer> tok;
  if (a.has("model")) f.emplace(open_model_file(a.get("model")));
  bool add_bos = !a.flag("no-bos");
  if (a.has("chat")) {
    const std::string chat_path = a.get("chat");
    const nlohmann::ordered_json messages = read_json(chat_path, "chat file");
    const bool add = !a.flag("no-generation-prompt");
    const std::string name = a.get("template");
    if (!name.empty() && is_chat_template_family(name)) {
      text = apply_chat_template(name, family_messages(messages, chat_path), add);
    } else {
      std::string tmpl;
      if (!name.empty()) {
        tmpl = read_file(name, "chat template file");
      } else {
        auto t = f->find_string("tokenizer.chat_template");
        if (!t)
          throw Error("model '" + a.get("model") +
                      "' has no tokenizer.chat_template; pass --template");
        tmpl = std::string(*t);
      }
      if (!messages.is_array())
        throw Error("chat file '" + chat_path + "': not a JSON list of messages");
      nlohmann::ordered_json tools;
      if (a.has("tools")) tools = read_json(a.get("tools"), "tools file");
      nlohmann::ordered_json extra;
      if (a.has("template-kwargs")) {
        try {
          extra = nlohmann::ordered_json::parse(a.get("template-kwargs"));
        } catch (const nlohmann::json::exception& e) {
          throw Error(std::string("--template-kwargs: ") + e.what());
        }
        if (!extra.is_object()) throw Error("--template-kwargs expects a JSON object");
      }
      if (f) tok = Tokenizer::from_gguf(*f);
      auto special = [&](const char* option, int32_t id) {
        if (a.has(option)) return a.get(option);
        return tok && id >= 0 ? tok->token_to_piece(id, true) : std::string();
      };
      const std::string bos = special("bos", tok ? tok->bos_id() : -1),
                        eos = special("eos", tok ? tok->eos_id() : -1);
      JinjaRenderOptions options;
      if (a.has("now")) options.now = parse_now(a.get("now"));
      text =
          render_chat_template(JinjaTemplate(tmpl), messages, tools, add, bos, eos, extra, options);
      // A template that writes BOS gets no second one, as kiln serve does.
      add_bos = add_bos && !(!bos.empty() && text.starts_with(bos));
    }
    if (a.flag("render")) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      return 0;
    }
  } else if (!a.has("jsonl")) {
    text = a.has("file") ? read_file(a.get("file"), "text file") : a.get("prompt");
  }
  if (!tok) tok = Tokenizer::from_gguf(*f);
  const bool bos = add_bos && tok->add_bos_default() && tok->bos_id() >= 0;
  auto print_ids = [](const std::vector<int32_t>& ids) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
  };
  if (a.flag("eog")) {
    print_ids(tok->vocab().eog);
    return 0;
  }
  if (a.has("jsonl")) {  // many texts, one process: a line of ids per line
    const std::string path = a.get("jsonl");
    std::istringstream lines(read_file(path, "JSON lines file"));
    std::string line;
    for (int64_t n = 1; std::getline(lines, line); ++n) {
      nlohmann::json t = nlohmann::json::parse(line, nullptr, false);
      if (!t.is_string())
        throw Error(path + ":" + std::to_string(n) + ": not a JSON string on one line");
      print_ids(tok->encode(t.get<std::string>(), bos, false));
    }
    return 0;
  }
  std::vector<int32_t> ids = tok->encode(text, bos, a.has("chat"));
  if (a.flag("pieces")) {
    for (int32_t id : ids) std::printf("%d\t%s\n", id, tok->token_to_piece(id, true).c_str());
    return 0;
  }
  print_ids(ids);
  return 0;
}

}  // namespace kiln
