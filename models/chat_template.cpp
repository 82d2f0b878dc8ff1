#include "models/chat_template.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <utility>

#include "ir/error.h"
#include "models/read_file.h"

namespace kiln {

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// llama.cpp's detection, in its order (a family Kiln lays out or not: an
// earlier match must not fall through to a later family).
std::string detect(const std::string& t) {
  auto has = [&](const char* mark) { return t.find(mark) != std::string::npos; };
  if (has("<|im_start|>"))
    return has("<|im_sep|>") ? "phi4" : has("<end_of_utterance>") ? "smolvlm" : "chatml";
  if (t.rfind("mistral", 0) == 0 || has("[INST]")) {
    if (has("[SYSTEM_PROMPT]")) return "mistral-v7";
    if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]"))
      return has(" [INST]") ? "mistral-v1" : has("\"[INST]\"") ? "mistral-v3-tekken" : "mistral-v3";
    if (has("content.strip()")) return "llama2-sys-strip";
    if (has("bos_token + '[INST]")) return "llama2-sys-bos";
    return has("<<SYS>>") ? "llama2-sys" : "llama2";
  }
  if (has("<|assistant|>") && has("<|end|>")) return "phi3";
  if (has("[gMASK]<sop>")) return "chatglm4";
  if (has("<|assistant|>") && has("<|user|>")) return has("</s>") ? "falcon3" : "glmedge";
  if (has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>")) return "glmedge";
  if (has("<|user|>") && has("<|endoftext|>")) return "zephyr";
  if (has("bos_token + message['role']")) return "monarch";
  if (has("<start_of_turn>")) return "gemma";
  if (has("'\\n\\nAssistant: ' + eos_token")) return "orion";
  if (has("GPT4 Correct ")) return "openchat";
  if (has("USER: ") && has("ASSISTANT: ")) return has("SYSTEM: ") ? "vicuna-orca" : "vicuna";
  if (has("### Instruction:") && has("<|EOT|>")) return "deepseek";
  if (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>")) return "command-r";
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return "llama3";
  if (has("[gMASK]sop")) return "chatglm3";
  if (has("<\xE7\x94\xA8\xE6\x88\xB7>")) return "minicpm";  // <用户>
  if (has("'Assistant: ' + message['content'] + eos_token")) return "deepseek2";
  if (has("<\xEF\xBD\x9C"
          "Assistant\xEF\xBD\x9C>") &&
      has("<\xEF\xBD\x9CUser\xEF\xBD\x9C>"))
    return "deepseek3";
  if (has("[|system|]") && has("[|assistant|]") && has("[|endofturn|]"))
    return has("[|tool|]") ? "exaone4" : "exaone3";
  if (has("rwkv-world")) return "rwkv-world";
  if (has("<|start_of_role|>")) return "granite";
  if (has("<|role_start|>")) return "megrez";
  if (has("<|header_start|>") && has("<|header_end|>")) return "llama4";
  if (has("<|start|>") && has("<|channel|>")) return "gpt-oss";
  return "";
}

using Layout = std::function<void(const std::vector<ChatMessage>&, bool, std::string&)>;

// role prefix and suffix around each message's content; `open` opens the
// assistant's turn.
Layout turns(std::string pre, std::string mid, std::string post, std::string open, bool trimmed) {
  return [=](const std::vector<ChatMessage>& ms, bool add, std::string& o) {
    for (const ChatMessage& m : ms)
      o += pre + m.role + mid + (trimmed ? trim(m.content) : m.content) + post;
    if (add) o += open;
  };
}

// Llama 2's [INST] turns and its variants: system in <<SYS>> (or not), BOS
// before each later turn, contents stripped.
Layout llama2(bool sys, bool bos, bool strip) {
  return [=](const std::vector<ChatMessage>& ms, bool, std::string& o) {
    bool inside = true;
    o += "[INST] ";
    for (const ChatMessage& m : ms) {
      const std::string c = strip ? trim(m.content) : m.content;
      if (!inside) {
        inside = true;
        o += bos ? "<s>[INST] " : "[INST] ";
      }
      if (m.role == "system")
        o += sys ? "<<SYS>>\n" + c + "\n<</SYS>>\n\n" : c + "\n";
      else if (m.role == "user")
        o += c + " [/INST]";
      else
        o += c + "</s>", inside = false;
    }
  };
}

// Mistral's v1 / v3 / v3-tekken turns (a space before [INST] in v1, after
// it but in tekken, assistant contents trimmed in v3).
Layout mistral(const std::string& lead, const std::string& trail, bool trim_assistant) {
  return [=](const std::vector<ChatMessage>& ms, bool, std::string& o) {
    bool inside = false;
    for (const ChatMessage& m : ms) {
      if (!inside) {
        o += lead + "[INST]" + trail;
        inside = true;
      }
      if (m.role == "system") {
        o += m.content + "\n\n";
      } else if (m.role == "user") {
        o += m.content + lead + "[/INST]";
      } else {
        o += trail + (trim_assistant ? trim(m.content) : m.content) + "</s>";
        inside = false;
      }
    }
  };
}

Layout mistral_v7(const std::string& sp) {
  return [=](const std::vector<ChatMessage>& ms, bool, std::string& o) {
    for (const ChatMessage& m : ms) {
      if (m.role == "system")
        o += "[SYSTEM_PROMPT]" + sp + m.content + "[/SYSTEM_PROMPT]";
      else if (m.role == "user")
        o += "[INST]" + sp + m.content + "[/INST]";
      else
        o += sp + m.content + "</s>";
    }
  };
}

// Gemma: no system turn (the system text opens the next user turn),
// "model" for the assistant, contents trimmed.
void gemma(const std::vector<ChatMessage>& ms, bool add, std::string& o) {
  std::string system;
  for (const ChatMessage& m : ms) {
    if (m.role == "system") {
      system += trim(m.content);
      continue;
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    o += "<start_of_turn>" + role + "\n";
    if (!system.empty() && role != "model") {
      o += system + "\n\n";
      system.clear();
    }
    o += trim(m.content) + "<end_of_turn>\n";
  }
  if (add) o += "<start_of_turn>model\n";
}

void command_r(const std::vector<ChatMessage>& ms, bool add, std::string& o) {
  for (const ChatMessage& m : ms) {
    const char* tok = m.role == "system"      ? "<|SYSTEM_TOKEN|>"
                      : m.role == "user"      ? "<|USER_TOKEN|>"
                      : m.role == "assistant" ? "<|CHATBOT_TOKEN|>"
                                              : nullptr;
    if (tok)
      o += std::string("<|START_OF_TURN_TOKEN|>") + tok + trim(m.content) + "<|END_OF_TURN_TOKEN|>";
  }
  if (add) o += "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>";
}

void deepseek3(const std::vector<ChatMessage>& ms, bool add, std::string& o) {
  const std::string user = "<\xEF\xBD\x9CUser\xEF\xBD\x9C>",
                    assistant =
                        "<\xEF\xBD\x9C"
                        "Assistant\xEF\xBD\x9C>",
                    end =
                        "<\xEF\xBD\x9C"
                        "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
  for (const ChatMessage& m : ms) {
    if (m.role == "system")
      o += m.content + "\n\n";
    else if (m.role == "user")
      o += user + m.content;
    else if (m.role == "assistant")
      o += assistant + m.content + end;
  }
  if (add) o += assistant;
}

void gpt_oss(const std::vector<ChatMessage>& ms, bool add, std::string& o) {
  for (const ChatMessage& m : ms)
    o += "<|start|>" + m.role + "<|message|>" + m.content +
         (m.role == "assistant" ? "<|return|>" : "<|end|>");
  if (add) o += "<|start|>assistant";
}

void granite(const std::vector<ChatMessage>& ms, bool add, std::string& o) {
  for (const ChatMessage& m : ms)
    o += "<|start_of_role|>" + m.role + "<|end_of_role|>" +
         (m.role == "assistant_tool_call" ? "<|tool_call|>" : "") + m.content + "<|end_of_text|>\n";
  if (add) o += "<|start_of_role|>assistant<|end_of_role|>";
}

const std::vector<std::pair<std::string, Layout>>& layouts() {
  static const std::vector<std::pair<std::string, Layout>> table = {
      {"chatml", turns("<|im_start|>", "\n", "<|im_end|>\n", "<|im_start|>assistant\n", false)},
      {"phi4",
       turns("<|im_start|>", "<|im_sep|>", "<|im_end|>", "<|im_start|>assistant<|im_sep|>", false)},
      {"llama2", llama2(false, false, false)},
      {"llama2-sys", llama2(true, false, false)},
      {"llama2-sys-bos", llama2(true, true, false)},
      {"llama2-sys-strip", llama2(true, false, true)},
      {"mistral-v1", mistral(" ", " ", false)},
      {"mistral-v3", mistral("", " ", true)},
      {"mistral-v3-tekken", mistral("", "", false)},
      {"mistral-v7", mistral_v7(" ")},
      {"mistral-v7-tekken", mistral_v7("")},
      {"phi3", turns("<|", "|>\n", "<|end|>\n", "<|assistant|>\n", false)},
      {"falcon3", turns("<|", "|>\n", "\n", "<|assistant|>\n", false)},
      {"zephyr", turns("<|", "|>\n", "<|endoftext|>\n", "<|assistant|>\n", false)},
      {"gemma", gemma},
      {"command-r", command_r},
      {"llama3", turns("<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>",
                       "<|start_header_id|>assistant<|end_header_id|>\n\n", true)},
      {"llama4", turns("<|header_start|>", "<|header_end|>\n\n", "<|eot|>",
                       "<|header_start|>assistant<|header_end|>\n\n", true)},
      {"deepseek3", deepseek3},
      {"granite", granite},
      {"gpt-oss", gpt_oss},
  };
  return table;
}

}  // namespace

const std::vector<std::string>& chat_template_families() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [name, layout] : layouts()) n.push_back(name);
    return n;
  }();
  return names;
}

bool is_chat_template_family(const std::string& name) {
  const auto& names = chat_template_families();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string render_chat_template(const JinjaTemplate& tmpl, const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                 const std::string& bos_token, const std::string& eos_token,
                                 const nlohmann::ordered_json& extra,
                                 const JinjaRenderOptions& options) {
  if (!messages.is_array()) throw Error("chat messages must be a JSON list");
  if (!tools.is_null() && !tools.is_array()) throw Error("chat tools must be a JSON list or null");
  if (!extra.is_null() && !extra.is_object())
    throw Error("chat template variables must be a JSON object");
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = messages;
  context["tools"] = tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = bos_token;
  context["eos_token"] = eos_token;
  if (extra.is_object())
    for (const auto& [k, v] : extra.items()) context[k] = v;
  return tmpl.render(context, options);
}

std::string render_chat_template(const std::string& template_text,
                                 const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                 const std::string& bos_token, const std::string& eos_token,
                                 const nlohmann::ordered_json& extra,
                                 const JinjaRenderOptions& options) {
  return render_chat_template(JinjaTemplate(template_text), messages, tools, add_generation_prompt,
                              bos_token, eos_token, extra, options);
}

std::string chat_template_option(const std::string& name_or_path) {
  const auto& names = chat_template_families();
  return std::find(names.begin(), names.end(), name_or_path) != names.end()
             ? name_or_path
             : read_file(name_or_path, "chat template file");
}

std::string chat_template_family(const std::string& tmpl) {
  const auto& names = chat_template_families();
  if (std::find(names.begin(), names.end(), tmpl) != names.end()) return tmpl;
  const std::string family = detect(tmpl);
  if (std::find(names.begin(), names.end(), family) != names.end()) return family;
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  throw Error((family.empty() ? std::string("the chat template matches no family Kiln knows")
                              : "chat template family '" + family + "' is not supported") +
              " (Kiln lays out " + list + ")");
}

std::string apply_chat_template(const std::string& family, const std::vector<ChatMessage>& messages,
                                bool add_assistant) {
  for (const auto& [name, layout] : layouts())
    if (name == family) {
      std::string out;
      layout(messages, add_assistant, out);
      return out;
    }
  return apply_chat_template(chat_template_family(family), messages, add_assistant);
}

}  // namespace kiln
