#include "models/tool_calls.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace kiln {

namespace {

constexpr size_t npos = std::string_view::npos;

size_t skip_space(std::string_view t, size_t p) {
  while (p < t.size() && (t[p] == ' ' || t[p] == '\n' || t[p] == '\t' || t[p] == '\r')) ++p;
  return p;
}

// The end of the JSON string opening at p (after its closing quote), or
// npos when the text ends first.
size_t string_end(std::string_view t, size_t p) {
  for (size_t i = p + 1; i < t.size(); ++i) {
    if (t[i] == '\\')
      ++i;
    else if (t[i] == '"')
      return i + 1;
  }
  return npos;
}

// The end of the JSON value starting at p, or npos when the text ends
// before it does (a number at the very end may go on, unless `final`).
size_t value_end(std::string_view t, size_t p, bool final) {
  if (p >= t.size()) return npos;
  if (t[p] == '"') return string_end(t, p);
  if (t[p] == '{' || t[p] == '[') {
    int depth = 0;
    for (size_t i = p; i < t.size(); ++i) {
      const char c = t[i];
      if (c == '"') {
        i = string_end(t, i);
        if (i == npos) return npos;
        --i;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        return i + 1;
      }
    }
    return npos;
  }
  size_t i = p;
  while (i < t.size() && t[i] != ',' && t[i] != '}' && t[i] != ']' && t[i] != ' ' && t[i] != '\n' &&
         t[i] != '\t' && t[i] != '\r')
    ++i;
  return i < t.size() || final ? i : npos;
}

std::string json_string(std::string_view quoted) {
  try {
    const nlohmann::json j = nlohmann::json::parse(quoted);
    return j.is_string() ? j.get<std::string>() : std::string(quoted);
  } catch (const nlohmann::json::exception&) {
    return std::string(quoted);
  }
}

// A call written as a JSON object {"name": ..., "arguments" (or
// "parameters"): ..., "id": ...} in any key order, read from p as far as
// the text goes. `end`: after its closing brace, npos while open; `bad`:
// not such an object.
struct ObjectCall {
  ParsedToolCall call;
  size_t end = npos;
  bool bad = false;
};

ObjectCall object_call(std::string_view t, size_t p, bool final) {
  ObjectCall out;
  p = skip_space(t, p);
  if (p >= t.size()) return out;
  if (t[p] != '{') {
    out.bad = true;
    return out;
  }
  ++p;
  for (;;) {
    p = skip_space(t, p);
    if (p >= t.size()) return out;
    if (t[p] == '}') {
      out.end = p + 1;
      out.bad = !out.call.name_done || !out.call.arguments_done;
      return out;
    }
    if (t[p] == ',') {
      ++p;
      continue;
    }
    if (t[p] != '"') {
      out.bad = true;
      return out;
    }
    const size_t key_end = string_end(t, p);
    if (key_end == npos) return out;
    const std::string key = json_string(t.substr(p, key_end - p));
    p = skip_space(t, key_end);
    if (p >= t.size()) return out;
    if (t[p] != ':') {
      out.bad = true;
      return out;
    }
    p = skip_space(t, p + 1);
    if (p >= t.size()) return out;
    const size_t end = value_end(t, p, final);
    if (key == "arguments" || key == "parameters") {
      out.call.arguments = std::string(t.substr(p, end == npos ? npos : end - p));
      out.call.arguments_done = end != npos;
    } else if (end != npos && (key == "name" || key == "id")) {
      if (t[p] != '"') {
        out.bad = true;
        return out;
      }
      (key == "name" ? out.call.name : out.call.id) = json_string(t.substr(p, end - p));
      out.call.name_done = out.call.name_done || key == "name";
    }
    if (end == npos) return out;
    p = end;
  }
}

// `content` without the end a later token could extend into `trigger`.
void hold_back(std::string& content, std::string_view trigger) {
  for (size_t n = std::min(content.size(), trigger.size() - 1); n > 0; --n)
    if (std::string_view(content).substr(content.size() - n) == trigger.substr(0, n)) {
      content.resize(content.size() - n);
      return;
    }
}

// Hermes and Mistral v3: content, then the trigger opens the calls.
void tagged_objects(std::string_view t, bool final, std::string_view open, std::string_view close,
                    ReplyParse& out) {
  size_t p = 0;
  for (;;) {
    const size_t at = t.find(open, p);
    if (at == npos) {
      out.content += t.substr(p);
      if (!final) hold_back(out.content, open);
      return;
    }
    out.content += t.substr(p, at - p);
    p = at + open.size();
    // Hermes: one object per block; Mistral v3: a list of them.
    const bool list = close.empty();
    if (list) {
      p = skip_space(t, p);
      if (p >= t.size()) return;
      if (t[p] != '[') {
        out.content += t.substr(at);
        return;
      }
      ++p;
    }
    for (;;) {
      ObjectCall c = object_call(t, p, final);
      if (c.bad) {
        out.content += t.substr(at);  // no call after all
        return;
      }
      // Open at the end: what has been generated of it (a reply cut by its
      // length keeps it so).
      out.calls.push_back(std::move(c.call));
      if (c.end == npos) return;
      p = skip_space(t, c.end);
      if (!list) break;
      if (p < t.size() && t[p] == ',') {
        ++p;
        continue;
      }
      if (p < t.size() && t[p] == ']') ++p;
      break;
    }
    if (!close.empty()) {
      const size_t c = t.find(close, p);
      if (c == npos) {
        if (final)
          p = t.size();
        else
          return;
      } else {
        p = c + close.size();
      }
    }
  }
}

// Llama 3.x: the whole reply one call object (after <|python_tag|>), or
// several separated by ';'; anything else is content.
void llama3(std::string_view t, bool final, ReplyParse& out) {
  size_t p = skip_space(t, 0);
  constexpr std::string_view tag = "<|python_tag|>";
  if (!final && p < t.size() && t.size() - p < tag.size() && tag.starts_with(t.substr(p)))
    return;  // may become the tag
  if (t.substr(p, tag.size()) == tag) p = skip_space(t, p + tag.size());
  if (p >= t.size()) {
    if (final) out.content = std::string(t);
    return;
  }
  if (t[p] != '{') {
    out.content = std::string(t);
    return;
  }
  ReplyParse calls;
  for (;;) {
    ObjectCall c = object_call(t, p, final);
    if (c.bad || (final && !c.call.name_done)) {
      out.content = std::string(t);  // not a call after all
      return;
    }
    // Held back whole until it is known to be a call: a name.
    if (!c.call.name_done) return;
    calls.calls.push_back(std::move(c.call));
    if (c.end == npos) break;
    p = skip_space(t, c.end);
    if (p < t.size() && t[p] == ';') p = skip_space(t, p + 1);
    if (p >= t.size() || t[p] != '{') {
      calls.content = std::string(t.substr(p));
      break;
    }
  }
  out = std::move(calls);
}

// Mistral v11: [TOOL_CALLS]name[CALL_ID]id[ARGS]{...}, repeated.
void mistral_args(std::string_view t, bool final, ReplyParse& out) {
  constexpr std::string_view open = "[TOOL_CALLS]", call_id = "[CALL_ID]", args = "[ARGS]";
  size_t p = t.find(open);
  out.content = std::string(t.substr(0, p));
  if (p == npos) {
    if (!final) hold_back(out.content, open);
    return;
  }
  while (p != npos && t.substr(p, open.size()) == open) {
    p += open.size();
    ParsedToolCall c;
    const size_t a = t.find(args, p), i = t.find(call_id, p);
    const size_t name_end = std::min(a, i);
    if (name_end == npos && !final) return;  // the name may go on
    c.name = std::string(t.substr(p, name_end == npos ? npos : name_end - p));
    c.name_done = true;
    if (i < a)
      c.id = std::string(t.substr(i + call_id.size(), a == npos ? npos : a - i - call_id.size()));
    if (a == npos) {
      out.calls.push_back(std::move(c));
      return;
    }
    p = a + args.size();
    const size_t end = value_end(t, p, final);
    c.arguments = std::string(t.substr(p, end == npos ? npos : end - p));
    c.arguments_done = end != npos;
    out.calls.push_back(std::move(c));
    if (end == npos) return;
    p = skip_space(t, end);
  }
  if (p != npos && p < t.size()) out.content += t.substr(p);
  if (!final) hold_back(out.content, open);
}

// GPT-OSS: harmony messages after the prompt's "<|start|>assistant".
void gpt_oss(std::string_view t, bool final, ReplyParse& out) {
  constexpr std::string_view start = "<|start|>assistant", message = "<|message|>";
  size_t p = 0;
  while (p < t.size()) {
    const size_t m = t.find(message, p);
    if (m == npos) {
      // A reply that is no harmony message is content.
      if (p == 0 && t.find("<|channel|>") == npos && t.find(" to=") == npos) {
        out.content = std::string(t);
        if (!final) hold_back(out.content, "<|channel|>");
      }
      return;
    }
    const std::string_view header = t.substr(p, m - p);
    size_t body = m + message.size();
    // The body ends at its terminator, a control token whose text comes
    // whole: none yet means it goes on.
    size_t end = npos;
    constexpr std::string_view terms[] = {"<|end|>", "<|call|>", "<|return|>"};
    for (std::string_view term : terms) end = std::min(end, t.find(term, body));
    std::string_view text = t.substr(body, end == npos ? npos : end - body);
    if (end == npos && !final)  // the start of a terminator, if it ends so
      for (size_t n = std::min<size_t>(text.size(), 9); n > 0; --n)
        if (std::any_of(std::begin(terms), std::end(terms), [&](std::string_view term) {
              return term.starts_with(text.substr(text.size() - n));
            })) {
          text.remove_suffix(n);
          break;
        }
    const size_t to = header.find("to=functions.");
    if (to != npos) {
      ParsedToolCall c;
      size_t n = to + 13;
      size_t name_end = n;
      while (name_end < header.size() && header[name_end] != ' ' && header[name_end] != '<')
        ++name_end;
      c.name = std::string(header.substr(n, name_end - n));
      c.name_done = true;
      c.arguments = std::string(text);
      c.arguments_done = end != npos || final;
      out.calls.push_back(std::move(c));
    } else if (header.find("<|channel|>analysis") != npos) {
      out.reasoning += text;
    } else {
      out.content += text;
    }
    if (end == npos) return;
    p = t.find('>', end) + 1;
    if (t.substr(p, start.size()) == start) p += start.size();
  }
}

}  // namespace

ToolSyntax tool_syntax_of(std::string_view tmpl) {
  auto has = [&](std::string_view mark) { return tmpl.find(mark) != npos; };
  if (has("<tool_call>")) return ToolSyntax::hermes;
  if (has("[TOOL_CALLS]"))
    return has("[ARGS]") ? ToolSyntax::mistral_args : ToolSyntax::mistral_list;
  if (has("<|channel|>") && has("<|call|>")) return ToolSyntax::gpt_oss;
  if (has("<|start_header_id|>") && has("\"parameters\": ")) return ToolSyntax::llama3_json;
  return ToolSyntax::none;
}

const char* tool_syntax_name(ToolSyntax s) {
  switch (s) {
    case ToolSyntax::none: return "none";
    case ToolSyntax::hermes: return "hermes";
    case ToolSyntax::llama3_json: return "llama3-json";
    case ToolSyntax::mistral_list: return "mistral-list";
    case ToolSyntax::mistral_args: return "mistral-args";
    case ToolSyntax::gpt_oss: return "gpt-oss";
  }
  return "none";
}

std::string tool_call_trigger(ToolSyntax s) {
  switch (s) {
    case ToolSyntax::hermes: return "<tool_call>";
    case ToolSyntax::mistral_list:
    case ToolSyntax::mistral_args: return "[TOOL_CALLS]";
    case ToolSyntax::llama3_json: return "{";
    case ToolSyntax::gpt_oss: return "to=functions.";
    case ToolSyntax::none: return "";
  }
  return "";
}

ReplyParse parse_reply(ToolSyntax s, std::string_view text, bool final) {
  ReplyParse out;
  switch (s) {
    case ToolSyntax::none: out.content = std::string(text); break;
    case ToolSyntax::hermes: tagged_objects(text, final, "<tool_call>", "</tool_call>", out); break;
    case ToolSyntax::mistral_list: tagged_objects(text, final, "[TOOL_CALLS]", "", out); break;
    case ToolSyntax::llama3_json: llama3(text, final, out); break;
    case ToolSyntax::mistral_args: mistral_args(text, final, out); break;
    case ToolSyntax::gpt_oss: gpt_oss(text, final, out); break;
  }
  return out;
}

std::vector<ReplyDelta> ReplyStream::diff(const ReplyParse& now) {
  std::vector<ReplyDelta> out;
  // What was sent is a prefix of what the parse says now: the rest is new.
  auto rest = [](const std::string& was, const std::string& is) {
    return is.size() > was.size() && is.compare(0, was.size(), was) == 0 ? is.substr(was.size())
                                                                         : std::string();
  };
  if (std::string c = rest(sent_.content, now.content); !c.empty()) {
    out.push_back({});
    out.back().content = std::move(c);
  }
  if (std::string r = rest(sent_.reasoning, now.reasoning); !r.empty()) {
    out.push_back({});
    out.back().reasoning = std::move(r);
  }
  for (size_t i = 0; i < now.calls.size(); ++i) {
    const ParsedToolCall& c = now.calls[i];
    if (!c.name_done) break;  // a call is announced by its name
    const bool fresh = i >= sent_.calls.size();
    if (fresh) sent_.calls.push_back({});
    ParsedToolCall& was = sent_.calls[i];
    std::string args = rest(was.arguments, c.arguments);
    if (!fresh && args.empty()) continue;
    ReplyDelta d;
    d.index = static_cast<int>(i);
    if (fresh) d.name = c.name;
    d.arguments = args;
    out.push_back(std::move(d));
    was = c;
  }
  sent_.content = now.content;
  sent_.reasoning = now.reasoning;
  return out;
}

std::vector<ReplyDelta> ReplyStream::push(std::string_view piece) {
  text_ += piece;
  return diff(parse_reply(syntax_, text_, false));
}

std::vector<ReplyDelta> ReplyStream::finish() { return diff(parse_reply(syntax_, text_, true)); }

}  // namespace kiln
