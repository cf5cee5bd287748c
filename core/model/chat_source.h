// Where a model keeps its chat template, and the BOS/EOS strings transformers hands it:
// a GGUF file's `tokenizer.chat_template` (BOS/EOS from tokenizer.ggml.bos_token_id /
// eos_token_id), or a model directory's `chat_template.jinja`, else `tokenizer_config.json`'s
// `chat_template` (a string, or a list of {"name", "template"}: "default", else the first),
// with its `bos_token` / `eos_token` (a string or {"content": ...}).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace attnviz {

struct ModelChat {
  std::string template_text;  // empty when the model ships none
  std::string where;          // where it was read, for messages ("" when none)
  std::optional<std::string> bos, eos;  // absent when the model defines no such token
};

// `path` as resolve_model_dir gives it (a directory or a GGUF file). Throws a data Error
// when a file that is there cannot be read (not JSON, a template that is not a string).
ModelChat read_model_chat(const std::string& path);

struct ChatRenderOptions;  // core/chat/jinja.h

// `messages` rendered through mc's template with `r` (BOS/EOS from mc where r has none).
// Throws a data Error: no template ("model `model_label` has no chat template ..." then
// `hint`), or the template's own error prefixed with where it was read.
std::string render_model_chat(const ModelChat& mc, const std::string& model_label, const nlohmann::ordered_json& messages,
                              ChatRenderOptions r, const std::string& hint);

// Largest chat messages file read (--messages, the GUI's --chat): 8 MiB, some two million
// tokens of text, more than any context attnviz runs. The parsed list takes up to about 15
// times the file's bytes in memory, so the limit also bounds that (a 42 MB file of a million
// messages would take over 1 GB).
constexpr int64_t kMaxChatMessagesBytes = int64_t{8} << 20;

// Reads a chat messages file (at most kMaxChatMessagesBytes of JSON, keys kept in order) and
// checks it (check_chat_messages). Throws a data Error naming the file.
nlohmann::ordered_json read_chat_messages(const std::string& path);

// Checks that `messages` is what a chat template takes: a JSON list of objects, each with
// a string "role" and a "content" that is a string, a list of parts or null (tool calls).
// Throws a data Error naming `where` and the first message that is not.
void check_chat_messages(const nlohmann::ordered_json& messages, const std::string& where);

}  // namespace attnviz
