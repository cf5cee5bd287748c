#include "ui/state/chat.h"

#include "core/chat/jinja.h"
#include "core/error.h"

namespace attnviz::ui {

nlohmann::ordered_json chat_messages(const std::vector<ChatTurn>& turns) {
  nlohmann::ordered_json m = nlohmann::ordered_json::array();
  for (const ChatTurn& t : turns) m.push_back({{"role", t.role}, {"content", t.content}});
  return m;
}

std::vector<ChatTurn> chat_turns_of(const nlohmann::ordered_json& messages, const std::string& where) {
  check_chat_messages(messages, where);
  std::vector<ChatTurn> turns;
  for (const auto& m : messages) {
    ChatTurn t;
    t.role = m["role"].get<std::string>();
    if (m.contains("content") && m["content"].is_string()) t.content = m["content"].get<std::string>();
    else if (m.contains("content") && !m["content"].is_null()) t.content = m["content"].dump();
    turns.push_back(std::move(t));
  }
  return turns;
}

ChatRendering render_chat(const ModelChat& chat, const std::string& model_label, const std::vector<ChatTurn>& turns,
                          bool generation_prompt, const std::string& date) {
  ChatRendering out;
  const std::string hint = "switch the text panel to Text and type the conversation yourself.";
  ChatRenderOptions r;
  r.date = date;
  try {
    r.add_generation_prompt = generation_prompt;
    out.text = render_model_chat(chat, model_label, chat_messages(turns), r, hint);
  } catch (const std::exception& e) {
    out.text.clear();
    out.error = e.what();
    return out;
  }
  // Turn k (k ≥ 1) begins where the first k turns, rendered alone, end; the generation
  // prompt where all of them end. Turn 0 begins after the BOS the template writes, if any
  // (a template is not asked to render no message: some refuse).
  out.turn_begin.assign(turns.size(), -1);
  if (!turns.empty())
    out.turn_begin[0] = chat.bos && !chat.bos->empty() && out.text.compare(0, chat.bos->size(), *chat.bos) == 0
                            ? static_cast<int64_t>(chat.bos->size())
                            : 0;
  r.add_generation_prompt = false;
  for (size_t k = 1; k <= turns.size(); ++k) {
    if (k == turns.size() && !generation_prompt) break;
    std::string prefix;
    try {
      prefix = render_model_chat(chat, model_label, chat_messages({turns.begin(), turns.begin() + static_cast<std::ptrdiff_t>(k)}),
                                 r, hint);
    } catch (const std::exception&) {
      continue;  // this prefix does not render alone: where the next span begins stays unknown
    }
    if (out.text.compare(0, prefix.size(), prefix) != 0) continue;
    if (k < turns.size()) out.turn_begin[k] = static_cast<int64_t>(prefix.size());
    else out.prompt_begin = static_cast<int64_t>(prefix.size());
  }
  return out;
}

ChatSpans chat_spans(const std::vector<TokenLabel>& labels, const ChatRendering& r, size_t n_turns) {
  ChatSpans s;
  s.span_of_token.assign(labels.size(), -1);
  s.first_token.assign(n_turns + 1, -1);
  // Span boundaries in bytes: turn k from turn_begin[k], the generation prompt from prompt_begin.
  std::vector<int64_t> begin(n_turns + 1, -1);
  for (size_t k = 0; k < n_turns && k < r.turn_begin.size(); ++k) begin[k] = r.turn_begin[k];
  begin[n_turns] = r.prompt_begin >= 0 ? r.prompt_begin : static_cast<int64_t>(r.text.size());
  int64_t at = 0;  // byte where the token begins
  for (size_t i = 0; i < labels.size(); ++i) {
    int span = -1;  // the last span begun at or before the token's first byte (unknown ones skipped)
    for (size_t k = 0; k <= n_turns; ++k)
      if (begin[k] >= 0 && begin[k] <= at) span = static_cast<int>(k);
    s.span_of_token[i] = span;
    if (span >= 0 && s.first_token[static_cast<size_t>(span)] < 0) s.first_token[static_cast<size_t>(span)] = static_cast<int>(i);
    at += static_cast<int64_t>(labels[i].bytes.size());
  }
  return s;
}

const std::string& ChatMarks::role_of(size_t k) const {
  static const std::string none;
  if (k >= span.size() || span[k] < 0 || static_cast<size_t>(span[k]) >= roles.size()) return none;
  return roles[static_cast<size_t>(span[k])];
}

ChatMarks chat_marks(const ChatSpans& spans, const std::vector<ChatTurn>& turns) {
  ChatMarks m;
  m.span = spans.span_of_token;
  for (const ChatTurn& t : turns) m.roles.push_back(t.role);
  m.roles.push_back("assistant");  // the generation prompt opens the assistant's turn
  return m;
}

}  // namespace attnviz::ui
