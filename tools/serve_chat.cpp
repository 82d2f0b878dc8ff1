#include "tools/serve_chat.h"

#include <algorithm>
#include <set>

#include "models/chat_template.h"
#include "models/grammar/json_schema.h"
#include "models/read_file.h"
#include "tools/serve_api.h"

namespace kiln {

namespace {

// Requests are read in order: a template prints tools and arguments as
// given.
using json = nlohmann::ordered_json;
using ojson = nlohmann::ordered_json;

constexpr auto invalid = invalid_field;

void check_utf8(const std::string& s, const std::string& param) {
  if (!valid_utf8(s)) throw ApiError(400, "'" + param + "' is not valid UTF-8", param);
}

// A message's content as templates take it: a string (text parts joined),
// or null.
ojson content_of(const json& m, const std::string& where) {
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return nullptr;
  if (it->is_string()) {
    check_utf8(it->get_ref<const std::string&>(), "messages");
    return it->get<std::string>();
  }
  if (!it->is_array())
    invalid("messages", where + "content must be a string, a list of parts or null");
  std::string text;
  for (const json& part : *it) {
    if (!part.is_object() || part.value("type", "") != "text" ||
        !part.value("text", json()).is_string())
      invalid("messages", where +
                              "content parts must be {\"type\": \"text\", \"text\": string} (Kiln "
                              "reads text only)");
    text += part["text"].get<std::string>();
  }
  check_utf8(text, "messages");
  return text;
}

// An assistant message's tool calls, their arguments parsed into objects
// as templates expect them (transformers does the same).
ojson tool_calls_of(const json& calls, const std::string& where) {
  if (!calls.is_array()) invalid("messages", where + "tool_calls must be a list");
  ojson out = ojson::array();
  for (const json& c : calls) {
    const json fn = c.is_object() ? c.value("function", json()) : json();
    if (!fn.is_object() || !fn.value("name", json()).is_string())
      invalid("messages", where +
                              "each tool call must be {\"id\", \"type\": \"function\", "
                              "\"function\": {\"name\": string, \"arguments\": string}}");
    ojson call = {{"id", c.value("id", "")}, {"type", "function"}};
    ojson f = {{"name", fn["name"].get<std::string>()}};
    const json args = fn.value("arguments", json("{}"));
    if (args.is_string()) {
      try {
        f["arguments"] = ojson::parse(args.get<std::string>());
      } catch (const json::exception&) {
        f["arguments"] = args.get<std::string>();  // as given: the template decides
      }
    } else {
      f["arguments"] = args;
    }
    call["function"] = std::move(f);
    out.push_back(std::move(call));
  }
  return out;
}

// The conversation as templates take it; a family layout takes only
// system, user and assistant turns of text.
ojson messages_of(const json& body, const ChatTemplate& tmpl) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) throw ApiError(400, "'messages' is required", "messages");
  if (!it->is_array() || it->empty()) invalid("messages", "must be a non-empty list");
  static const std::set<std::string> roles = {"system", "developer", "user", "assistant", "tool"};
  static const std::set<std::string> fields = {
      "role", "content", "name", "tool_calls", "tool_call_id", "refusal", "reasoning_content"};
  ojson out = ojson::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string where = "message " + std::to_string(i) + ": ";
    if (!m.is_object() || !m.value("role", json()).is_string())
      invalid("messages", where + "must be an object with a string 'role'");
    for (const auto& [key, v] : m.items())
      if (!fields.count(key))
        invalid("messages", where + "field '" + key + "' is not one Kiln takes");
    const std::string role = m["role"].get<std::string>();
    if (!roles.count(role))
      invalid("messages",
              where + "role '" + role + "' is not system, developer, user, assistant or tool");
    ojson msg = {{"role", role}, {"content", content_of(m, where)}};
    for (const char* key : {"name", "tool_call_id", "reasoning_content"})
      if (auto f = m.find(key); f != m.end() && !f->is_null()) {
        if (!f->is_string()) invalid("messages", where + "'" + key + "' must be a string");
        msg[key] = f->get<std::string>();
      }
    if (auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
      if (role != "assistant")
        invalid("messages", where + "only assistant messages carry tool_calls");
      msg["tool_calls"] = tool_calls_of(*calls, where);
    }
    if (!tmpl.jinja) {
      if ((role != "system" && role != "user" && role != "assistant") ||
          msg.contains("tool_calls") || !msg["content"].is_string())
        invalid("messages",
                where + "the chat layout '" + tmpl.family +
                    "' (--chat-template) lays out system, user and assistant text only");
    }
    out.push_back(std::move(msg));
  }
  return out;
}

// tools, tool_choice and parallel_tool_calls.
ChatTools tools_of(const json& body, const ChatTemplate& tmpl) {
  ChatTools t;
  auto list = body.find("tools");
  const bool given = list != body.end() && !list->is_null();
  if (given) {
    if (!list->is_array())
      invalid("tools", "must be a list of {\"type\": \"function\", \"function\": {...}}");
    std::set<std::string> names;
    for (const json& tool : *list) {
      const json fn = tool.is_object() ? tool.value("function", json()) : json();
      if (!tool.is_object() || tool.value("type", "") != "function" || !fn.is_object() ||
          !fn.value("name", json()).is_string())
        invalid("tools",
                "must be a list of {\"type\": \"function\", \"function\": {\"name\": string, "
                "\"description\", \"parameters\", \"strict\"}}");
      const std::string name = fn["name"].get<std::string>();
      if (name.empty() || !names.insert(name).second)
        invalid("tools", "names a function '" + name + "' that is empty or given twice");
      if (auto p = fn.find("parameters"); p != fn.end() && !p->is_null() && !p->is_object())
        invalid("tools", "function '" + name + "': parameters must be a JSON Schema object");
      if (auto s = fn.find("strict"); s != fn.end() && !s->is_null() && !s->is_boolean())
        invalid("tools", "function '" + name + "': strict must be true or false");
      t.functions.push_back(fn);
    }
  }
  t.choice = given && !t.functions.empty() ? ChatTools::Choice::automatic : ChatTools::Choice::none;
  if (auto c = body.find("tool_choice"); c != body.end() && !c->is_null()) {
    if (c->is_string() && (*c == "none" || *c == "auto" || *c == "required")) {
      t.choice = *c == "none"   ? ChatTools::Choice::none
                 : *c == "auto" ? ChatTools::Choice::automatic
                                : ChatTools::Choice::required;
    } else if (c->is_object() && c->value("type", "") == "function" &&
               c->value("function", json()).is_object() &&
               (*c)["function"].value("name", json()).is_string()) {
      t.choice = ChatTools::Choice::named;
      t.named = (*c)["function"]["name"].get<std::string>();
    } else {
      invalid("tool_choice",
              "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
              "\"function\": {\"name\": ...}}");
    }
    if (t.choice != ChatTools::Choice::none && t.functions.empty())
      invalid("tool_choice", "asks for a tool call but 'tools' lists none");
    if (t.choice == ChatTools::Choice::named &&
        std::none_of(t.functions.begin(), t.functions.end(),
                     [&](const ojson& f) { return f["name"] == t.named; }))
      invalid("tool_choice", "names the function '" + t.named + "', which 'tools' does not list");
  }
  if (auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    if (!p->is_boolean()) invalid("parallel_tool_calls", "must be true or false");
    t.parallel = p->get<bool>();
  }
  if (t.choice != ChatTools::Choice::none) {
    if (!tmpl.jinja)
      invalid("tools", "the chat layout '" + tmpl.family + "' (--chat-template) has no tools");
    if (tmpl.tools == ToolSyntax::none)
      invalid("tools",
              "the model's chat template writes no tool calls Kiln reads (Hermes "
              "<tool_call>, Llama 3.x JSON, Mistral [TOOL_CALLS], GPT-OSS)");
    t.syntax = tmpl.tools;
  }
  return t;
}

}  // namespace

ChatTemplate chat_template_for(const std::string& option, const std::string& model_template,
                               const Tokenizer& tok) {
  ChatTemplate t;
  if (tok.bos_id() >= 0) t.bos = tok.token_to_piece(tok.bos_id(), true);
  if (tok.eos_id() >= 0) t.eos = tok.token_to_piece(tok.eos_id(), true);
  std::string text = model_template;
  if (!option.empty()) {
    if (is_chat_template_family(option)) {
      t.family = option;
      return t;
    }
    text = read_file(option, "chat template file");
  }
  if (text.empty()) {
    t.family = "chatml";  // as llama.cpp, for a model without a template
    return t;
  }
  try {
    t.jinja = std::make_shared<const JinjaTemplate>(text);
    t.tools = tool_syntax_of(text);
  } catch (const Error& e) {
    t.error = std::string("the chat template does not parse: ") + e.what() +
              "; start the server with --chat-template NAME (" +
              std::to_string(chat_template_families().size()) + " layouts, e.g. chatml, llama3)";
  }
  return t;
}

ChatPrompt chat_prompt(const nlohmann::ordered_json& body, const Tokenizer& tok,
                       const ChatTemplate& tmpl) {
  if (!tmpl.error.empty()) throw ApiError(422, tmpl.error, "messages");
  ChatPrompt out;
  const ojson messages = messages_of(body, tmpl);
  out.tools = tools_of(body, tmpl);
  std::string text;
  if (!tmpl.jinja) {
    std::vector<ChatMessage> msgs;
    for (const ojson& m : messages) msgs.push_back({m["role"], m["content"]});
    text = apply_chat_template(tmpl.family, msgs, true);
  } else {
    ojson extra = nullptr;
    if (auto k = body.find("chat_template_kwargs"); k != body.end() && !k->is_null()) {
      if (!k->is_object()) invalid("chat_template_kwargs", "must be an object");
      extra = *k;
    }
    ojson tools = nullptr;
    if (out.tools.choice != ChatTools::Choice::none) {
      tools = ojson::array();
      for (const ojson& f : out.tools.functions)
        tools.push_back({{"type", "function"}, {"function", f}});
    }
    try {
      text = render_chat_template(*tmpl.jinja, messages, tools, true, tmpl.bos, tmpl.eos, extra);
    } catch (const JinjaRaised& e) {
      throw ApiError(422, std::string("the chat template refuses this conversation: ") + e.what(),
                     "messages");
    } catch (const Error& e) {
      throw ApiError(422, std::string("the chat template fails on this conversation: ") + e.what(),
                     "messages");
    }
  }
  // A template that writes BOS itself gets no second one.
  const bool bos = tok.add_bos_default() && tok.bos_id() >= 0 &&
                   !(tmpl.jinja && !tmpl.bos.empty() && text.starts_with(tmpl.bos));
  out.tokens = tok.encode(text, bos, true);
  return out;
}

namespace {

// GBNF for one call object {"name": NAME, ARGS_KEY: arguments} of any
// listed function (or `only`), its root renamed `call`.
std::string call_object_gbnf(const ChatTools& t, const std::string& args_key,
                             const std::string& only) {
  ojson branches = ojson::array();
  for (const ojson& f : t.functions) {
    if (!only.empty() && f["name"] != only) continue;
    const bool strict = f.value("strict", false);
    ojson params = f.contains("parameters") && f["parameters"].is_object()
                       ? f["parameters"]
                       : ojson{{"type", "object"}};
    try {
      json_schema_to_gbnf(params);
    } catch (const Error& e) {
      if (strict)
        invalid("tools", "function '" + f["name"].get<std::string>() + "' is strict, but its " +
                             "parameters cannot hold a reply: " + e.what());
      params = {{"type", "object"}};
    }
    branches.push_back({{"type", "object"},
                        {"properties", {{"name", {{"const", f["name"]}}}, {args_key, params}}},
                        {"required", {"name", args_key}},
                        {"additionalProperties", false}});
  }
  const ojson schema = branches.size() == 1 ? branches[0] : ojson{{"anyOf", branches}};
  std::string g = json_schema_to_gbnf(schema);
  // The converter's start rule becomes `call`: a line that begins "root ::=".
  const size_t at = g.starts_with("root ::=") ? 0 : g.find("\nroot ::=");
  if (at == std::string::npos) throw Error("tool grammar: the schema's grammar has no root rule");
  g.replace(at == 0 ? 0 : at + 1, 4, "call");
  return g;
}

std::string gbnf_literal(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out + "\"";
}

}  // namespace

ToolGrammar tool_grammar(const ChatTools& t) {
  using Choice = ChatTools::Choice;
  const bool strict = std::any_of(t.functions.begin(), t.functions.end(),
                                  [](const ojson& f) { return f.value("strict", false); });
  const bool forced = t.choice == Choice::required || t.choice == Choice::named;
  if (t.choice == Choice::none || (!forced && !strict)) return {};
  const std::string only = t.choice == Choice::named ? t.named : "";
  std::string open, close, key;
  switch (t.syntax) {
    case ToolSyntax::hermes:
      open = "<tool_call>\n", close = "\n</tool_call>", key = "arguments";
      break;
    case ToolSyntax::llama3_json: key = "parameters"; break;
    default:
      if (!forced) return {};  // strict calls are read as they come
      invalid("tool_choice",
              std::string("needs a tool-call syntax Kiln can hold a reply to (Hermes ") +
                  "<tool_call>, Llama 3.x JSON); this template writes " +
                  tool_syntax_name(t.syntax) + "'s, whose marks are control tokens");
  }
  ToolGrammar out;
  std::string one = gbnf_literal(open) + " call " + gbnf_literal(close);
  if (open.empty()) one = "call";
  out.gbnf = "root ::= " + one + (t.parallel && !open.empty() ? " ( \"\\n\" " + one + " )*" : "") +
             "\n" + call_object_gbnf(t, key, only);
  if (!forced) out.trigger = tool_call_trigger(t.syntax);
  return out;
}

std::string tool_call_id(uint64_t seed, size_t index) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  uint64_t x = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  std::string id;
  for (int i = 0; i < 9; ++i, x /= 62) id += abc[x % 62];
  return id;
}

nlohmann::ordered_json chat_message(const ReplyParse& reply, uint64_t seed) {
  nlohmann::ordered_json m = {{"role", "assistant"}, {"content", reply.content}};
  if (!reply.reasoning.empty()) m["reasoning_content"] = reply.reasoning;
  if (reply.calls.empty()) return m;
  if (reply.content.find_first_not_of(" \n\t\r") == std::string::npos) m["content"] = nullptr;
  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  for (size_t i = 0; i < reply.calls.size(); ++i)
    calls.push_back(
        {{"id", tool_call_id(seed, i)},
         {"type", "function"},
         {"function", {{"name", reply.calls[i].name}, {"arguments", reply.calls[i].arguments}}}});
  m["tool_calls"] = std::move(calls);
  return m;
}

}  // namespace kiln
