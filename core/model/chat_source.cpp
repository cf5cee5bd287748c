#include "core/model/chat_source.h"

#include <sys/stat.h>

#include "core/chat/jinja.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"
#include "core/model/gguf.h"

namespace attnviz {

namespace {

bool is_file(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// tokenizer_config.json's bos_token / eos_token: "<s>", {"content": "<s>", ...}, or absent/null.
std::optional<std::string> special_token(const nlohmann::json& cfg, const char* key) {
  if (!cfg.contains(key)) return std::nullopt;
  const nlohmann::json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

ModelChat from_gguf(const std::string& path) {
  const GgufFile f = GgufFile::open(path);
  ModelChat c;
  if (const GgufValue* t = f.find_key("tokenizer.chat_template")) {
    if (t->type != GgufValueType::STRING)
      throw Error("GGUF file '" + excerpt(path, kPathExcerptBytes) + "': 'tokenizer.chat_template' is not a string");
    c.template_text = t->s;
    c.where = "'" + excerpt(path, kPathExcerptBytes) + "' (tokenizer.chat_template)";
  }
  if (const auto tok = read_gguf_tokenizer(f)) {
    auto piece = [&](int64_t id) -> std::optional<std::string> {
      if (id < 0 || id >= static_cast<int64_t>(tok->tokens.size())) return std::nullopt;
      return tok->tokens[static_cast<size_t>(id)];
    };
    c.bos = piece(tok->bos_id);
    c.eos = piece(tok->eos_id);
  }
  return c;
}

ModelChat from_dir(const std::string& dir) {
  ModelChat c;
  const std::string cfg_path = dir + "/tokenizer_config.json", jinja = dir + "/chat_template.jinja";
  nlohmann::json cfg = nlohmann::json::object();
  if (is_file(cfg_path)) cfg = read_json_file(cfg_path, "tokenizer_config.json");
  if (!cfg.is_object()) throw Error("'" + excerpt(cfg_path, kPathExcerptBytes) + "' is not a JSON object");
  c.bos = special_token(cfg, "bos_token");
  c.eos = special_token(cfg, "eos_token");
  if (is_file(jinja)) {
    c.template_text = read_regular_file(jinja, kMaxTemplateBytes, "chat_template.jinja", /*allow_nul=*/false);
    c.where = "'" + excerpt(jinja, kPathExcerptBytes) + "'";
    return c;
  }
  if (!cfg.contains("chat_template") || cfg["chat_template"].is_null()) return c;
  const nlohmann::json& t = cfg["chat_template"];
  const std::string where = "'" + excerpt(cfg_path, kPathExcerptBytes) + "' (chat_template)";
  if (t.is_string()) {
    c.template_text = t.get<std::string>();
  } else if (t.is_array() && !t.empty()) {  // named templates: "default", else the first
    const nlohmann::json* pick = &t[0];
    for (const auto& e : t)
      if (e.is_object() && e.value("name", "") == "default") pick = &e;
    if (!pick->is_object() || !pick->contains("template") || !(*pick)["template"].is_string())
      throw Error(where + ": a list of templates needs {\"name\": ..., \"template\": \"...\"} entries");
    c.template_text = (*pick)["template"].get<std::string>();
  } else {
    throw Error(where + ": a chat template is a string or a list of {\"name\", \"template\"}");
  }
  c.where = where;
  return c;
}

}  // namespace

ModelChat read_model_chat(const std::string& path) {
  struct stat st {};
  const bool dir = stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  return !dir && looks_like_gguf(path) ? from_gguf(path) : from_dir(path);
}

void check_chat_messages(const nlohmann::ordered_json& messages, const std::string& where) {
  const std::string hint =
      "\n  HINT: a chat is a JSON list of messages, e.g. [{\"role\": \"user\", \"content\": \"Hi!\"}].";
  if (!messages.is_array()) throw Error(where + ": not a list of messages (found a JSON " + messages.type_name() + ")" + hint);
  if (messages.empty()) throw Error(where + ": the list of messages is empty" + hint);
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    const std::string which = where + ": message " + std::to_string(i + 1);
    if (!m.is_object()) throw Error(which + " is not an object (found a JSON " + m.type_name() + ")" + hint);
    if (!m.contains("role") || !m["role"].is_string()) throw Error(which + " has no \"role\" string" + hint);
    if (m.contains("content") && !m["content"].is_string() && !m["content"].is_array() && !m["content"].is_null())
      throw Error(which + ": \"content\" must be a string, a list of parts or null (found a JSON " +
                  std::string(m["content"].type_name()) + ")" + hint);
  }
}

nlohmann::ordered_json read_chat_messages(const std::string& path) {
  nlohmann::ordered_json messages = read_json_file_ordered(path, "chat messages", "", kMaxChatMessagesBytes);
  check_chat_messages(messages, excerpt(path, kPathExcerptBytes));
  return messages;
}

std::string render_model_chat(const ModelChat& mc, const std::string& model_label, const nlohmann::ordered_json& messages,
                              ChatRenderOptions r, const std::string& hint) {
  if (mc.template_text.empty())
    throw Error("model '" + excerpt(model_label, kPathExcerptBytes) +
                    "' has no chat template (no tokenizer.chat_template, chat_template.jinja or tokenizer_config.json's "
                    "chat_template)" + (hint.empty() ? "" : "\n  HINT: " + hint),
                ErrorKind::Data);
  if (!r.bos_token) r.bos_token = mc.bos;
  if (!r.eos_token) r.eos_token = mc.eos;
  try {
    return render_chat_template(mc.template_text, messages, r);
  } catch (const Error& e) {
    throw Error("the chat template of " + mc.where + ": " + e.what(), e.kind);
  }
}

}  // namespace attnviz
