// Chat mode: the text is a conversation rendered through the model's own chat template
// (core/model/chat_source.h, core/chat/jinja.h), as the model sees it in use: turn markers,
// special tokens and the generation prompt included. What follows the rendered prompt in
// the text is the reply being generated (Next token: step / play). No ImGui; unit-tested
// in tests/test_chat_mode.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/chat_source.h"
#include "core/tokenize/labels.h"

namespace attnviz::ui {

struct ChatTurn {
  std::string role = "user";  // "system", "user" or "assistant" (any string reaches the template)
  std::string content;
  bool operator==(const ChatTurn& o) const { return role == o.role && content == o.content; }
  bool operator!=(const ChatTurn& o) const { return !(*this == o); }
};

struct ChatRendering {
  std::string text;   // the template's output; "" on error
  std::string error;  // why it did not render: no template, or the template's error with its line
  // Byte in `text` where each turn begins (the template's output for the turns before it,
  // rendered alone, is a prefix of `text`); −1 where that prefix is not found (a template
  // that refuses a partial conversation, or changes earlier turns by what follows).
  std::vector<int64_t> turn_begin;
  int64_t prompt_begin = -1;  // where the generation prompt begins (−1: none asked for, or not found)
};

// Renders `turns` through `chat`'s template (BOS/EOS as the model defines them), with the
// generation prompt when `generation_prompt`; `date` is what strftime_now sees ("" today).
// Each prefix of the conversation is rendered too, to find where its turns begin. Never throws.
ChatRendering render_chat(const ModelChat& chat, const std::string& model_label, const std::vector<ChatTurn>& turns,
                          bool generation_prompt, const std::string& date = "");

// The span of the text each token belongs to, from the tokens' labels (their bytes, in
// order from byte 0 of the rendered text): −1 before the first turn (a BOS the template
// writes), turn k, then turns.size() for the generation prompt and the reply after it.
// Where a turn's beginning is not known (−1), its tokens count to the turn before.
struct ChatSpans {
  std::vector<int> span_of_token;   // (all tokens)
  std::vector<int> first_token;     // (turns + 1): the first token of each span; −1 when none
};
ChatSpans chat_spans(const std::vector<TokenLabel>& labels, const ChatRendering& r, size_t n_turns);

// What the token strip and the heatmap mark in chat mode, per token of the whole text
// (window position t is token dropped + t).
struct ChatMarks {
  std::vector<int> span;           // (all tokens) ChatSpans::span_of_token
  std::vector<std::string> roles;  // (turns + 1) each span's role; the last is "assistant" (generation prompt, reply)
  bool active() const { return !span.empty(); }
  // Token k's role ("" before the first turn, or past the marks).
  const std::string& role_of(size_t k) const;
  // Whether token k begins its span (a turn, or the generation prompt).
  bool begins(size_t k) const { return k < span.size() && span[k] >= 0 && (k == 0 || span[k] != span[k - 1]); }
};
ChatMarks chat_marks(const ChatSpans& spans, const std::vector<ChatTurn>& turns);

// What a frame in chat mode has: the rendering of the turns, and the marks of the tokens shown.
struct ChatView {
  ChatRendering rendering;
  ChatMarks marks;
};

// The turns as the messages JSON a template reads ([{"role", "content"}, ...]).
nlohmann::ordered_json chat_messages(const std::vector<ChatTurn>& turns);
// The turns of a messages JSON (check_chat_messages's form; a content that is not a string
// is kept as its JSON text). Throws a data Error naming `where` when it is not a list of messages.
std::vector<ChatTurn> chat_turns_of(const nlohmann::ordered_json& messages, const std::string& where);

}  // namespace attnviz::ui
