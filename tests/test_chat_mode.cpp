// The GUI's chat mode without ImGui (ui/chat.h): where each turn and the generation prompt
// begin in the rendered text, against positions found in the text itself; the tokens'
// spans against byte offsets computed here; a template that refuses a partial conversation;
// the real templates of ../shared/chat-templates; the messages file; the settings.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "test_util.h"
#include "ui/state/chat.h"
#include "ui/state/settings.h"

using namespace attnviz;
using namespace attnviz::ui;

namespace {

// A ChatML template written here: BOS, then <|im_start|>ROLE\nCONTENT<|im_end|>\n per turn.
const char* kChatMl =
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

ModelChat chatml() {
  ModelChat c;
  c.template_text = kChatMl;
  c.where = "the test's template";
  c.bos = "<s>";
  return c;
}

std::vector<ChatTurn> four_turns() {
  return {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Why is the sky blue?"}};
}

// Byte offsets of each occurrence of `needle` in `s`, in order.
std::vector<int64_t> find_all(const std::string& s, const std::string& needle) {
  std::vector<int64_t> at;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) at.push_back(static_cast<int64_t>(p));
  return at;
}

}  // namespace

TEST(UiChat, TurnsBeginAtTheirMarkers) {
  const auto turns = four_turns();
  const ChatRendering r = render_chat(chatml(), "m", turns, /*generation_prompt*/ true);
  ASSERT_TRUE(r.error.empty()) << r.error;
  // The text, written out by hand from the template's definition.
  std::string want = "<s>";
  for (const auto& t : turns) want += "<|im_start|>" + t.role + "\n" + t.content + "<|im_end|>\n";
  want += "<|im_start|>assistant\n";
  EXPECT_EQ(r.text, want);
  const std::vector<int64_t> starts = find_all(want, "<|im_start|>");
  ASSERT_EQ(starts.size(), 5u);
  ASSERT_EQ(r.turn_begin.size(), 4u);
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(r.turn_begin[k], starts[k]) << "turn " << k;
  EXPECT_EQ(r.prompt_begin, starts[4]);
  // Without the generation prompt: no prompt, the text ends after the last turn.
  const ChatRendering n = render_chat(chatml(), "m", turns, false);
  EXPECT_EQ(n.text, want.substr(0, static_cast<size_t>(starts[4])));
  EXPECT_EQ(n.prompt_begin, -1);
}

TEST(UiChat, TokensTakeTheSpanTheirFirstByteIsIn) {
  const auto turns = four_turns();
  const ChatRendering r = render_chat(chatml(), "m", turns, true);
  ASSERT_TRUE(r.error.empty());
  // Tokens of 1 to 5 bytes (a fixed pattern), plus a generated reply after the prompt.
  const std::string text = r.text + "Light scatters.";
  std::vector<TokenLabel> labels;
  for (size_t at = 0, i = 0; at < text.size(); ++i) {
    const size_t n = std::min(text.size() - at, 1 + i % 5);
    labels.push_back(TokenLabel{text.substr(at, n), text.substr(at, n), false});
    at += n;
  }
  const ChatSpans s = chat_spans(labels, r, turns.size());
  ASSERT_EQ(s.span_of_token.size(), labels.size());
  std::vector<int64_t> begin = r.turn_begin;
  begin.push_back(r.prompt_begin);
  int64_t at = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    int want = -1;
    for (size_t k = 0; k < begin.size(); ++k)
      if (at >= begin[k]) want = static_cast<int>(k);
    EXPECT_EQ(s.span_of_token[i], want) << "token " << i << " at byte " << at;
    at += static_cast<int64_t>(labels[i].bytes.size());
  }
  EXPECT_EQ(s.span_of_token.front(), -1);  // "<s>" comes before the first turn
  EXPECT_EQ(s.span_of_token.back(), 4);    // the reply is the generation prompt's span
  const ChatMarks m = chat_marks(s, turns);
  ASSERT_EQ(m.roles.size(), 5u);
  EXPECT_EQ(m.roles.back(), "assistant");
  int begun = 0;
  for (size_t k = 0; k < labels.size(); ++k) begun += m.begins(k);
  EXPECT_EQ(begun, 5);  // four turns and the prompt
  EXPECT_EQ(m.role_of(0), "");
  EXPECT_EQ(m.role_of(labels.size() - 1), "assistant");
}

TEST(UiChat, ATemplateThatRefusesAPartialChatLeavesThoseBeginningsUnknown) {
  // Refuses a conversation that does not end with a user turn (some templates check roles).
  ModelChat c = chatml();
  c.template_text = std::string("{% if messages[-1].role != 'user' %}{{ raise_exception('must end with user') }}{% endif %}") + kChatMl;
  const auto turns = four_turns();
  const ChatRendering r = render_chat(c, "m", turns, true);
  ASSERT_TRUE(r.error.empty()) << r.error;
  const std::vector<int64_t> starts = find_all(r.text, "<|im_start|>");
  ASSERT_EQ(r.turn_begin.size(), 4u);
  EXPECT_EQ(r.turn_begin[0], starts[0]);
  EXPECT_EQ(r.turn_begin[1], -1);         // turns[0..1) ends with system: refused
  EXPECT_EQ(r.turn_begin[2], starts[2]);  // turns[0..2) ends with user
  EXPECT_EQ(r.turn_begin[3], -1);         // ends with assistant
  EXPECT_EQ(r.prompt_begin, starts[4]);
  // The whole chat ending with an assistant turn: the template's own error, with its line.
  const ChatRendering bad = render_chat(c, "m", {{"user", "a"}, {"assistant", "b"}}, true);
  EXPECT_TRUE(bad.text.empty());
  EXPECT_NE(bad.error.find("must end with user"), std::string::npos) << bad.error;
  // No template at all.
  const ChatRendering none = render_chat(ModelChat{}, "my-model", turns, true);
  EXPECT_NE(none.error.find("has no chat template"), std::string::npos) << none.error;
  EXPECT_NE(none.error.find("my-model"), std::string::npos) << none.error;
}

TEST(UiChat, RealTemplatesMarkEachTurnAtItsHeader) {
  // ../shared/chat-templates (ctest sets ATTNVIZ_CHAT_TEMPLATES_DIR; else beside the source tree)
  const char* env = std::getenv("ATTNVIZ_CHAT_TEMPLATES_DIR");
  const std::string dir = env ? env : (std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "shared" / "chat-templates").string();
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir << " is missing (set ATTNVIZ_CHAT_TEMPLATES_DIR)";
  // Templates whose turns begin with a header that names the role.
  struct Case {
    const char* file;
    std::string header_before_role, bos;
  } cases[] = {{"qwen2.5.jinja", "<|im_start|>", ""}, {"llama3.1.jinja", "<|start_header_id|>", "<|begin_of_text|>"},
               {"granite4.0.jinja", "<|start_of_role|>", ""}};
  for (const Case& cs : cases) {
    ModelChat c;
    c.template_text = test::read_file(dir + "/" + cs.file);
    c.where = cs.file;
    if (!cs.bos.empty()) c.bos = cs.bos;
    const auto turns = four_turns();
    const ChatRendering r = render_chat(c, cs.file, turns, true, "2026-11-29");
    ASSERT_TRUE(r.error.empty()) << cs.file << ": " << r.error;
    ASSERT_EQ(r.turn_begin.size(), turns.size());
    for (size_t k = 1; k < turns.size(); ++k) {
      ASSERT_GE(r.turn_begin[k], 0) << cs.file << " turn " << k;
      EXPECT_EQ(r.text.compare(static_cast<size_t>(r.turn_begin[k]), cs.header_before_role.size() + turns[k].role.size(),
                               cs.header_before_role + turns[k].role),
                0)
          << cs.file << " turn " << k << ": " << r.text.substr(static_cast<size_t>(r.turn_begin[k]), 40);
    }
    ASSERT_GE(r.prompt_begin, 0) << cs.file;
    EXPECT_EQ(r.text.compare(static_cast<size_t>(r.prompt_begin), cs.header_before_role.size() + 9,
                             cs.header_before_role + "assistant"),
              0)
        << cs.file << ": " << r.text.substr(static_cast<size_t>(r.prompt_begin));
  }
}

TEST(UiChat, MessagesFileAndSettings) {
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(
      R"([{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "x"}]}, {"role": "assistant", "content": null}])");
  const std::vector<ChatTurn> t = chat_turns_of(j, "f.json");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0], (ChatTurn{"system", "s"}));
  EXPECT_EQ(t[1].content, j[1]["content"].dump());  // a list of parts kept as its JSON
  EXPECT_EQ(t[2], (ChatTurn{"assistant", ""}));
  EXPECT_EQ(chat_messages(t)[0], (nlohmann::ordered_json{{"role", "system"}, {"content", "s"}}));
  try {
    chat_turns_of(nlohmann::ordered_json::parse(R"({"role": "user"})"), "f.json");
    FAIL() << "an object is not a list of messages";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f.json: not a list of messages"), std::string::npos) << e.what();
  }
  AppState s, u;
  s.chat = true;
  s.chat_generation_prompt = false;
  s.chat_turns = four_turns();
  PanelVisibility vis;
  ASSERT_TRUE(settings_from_json(settings_to_json(s, vis), u, vis));
  EXPECT_TRUE(u.chat);
  EXPECT_FALSE(u.chat_generation_prompt);
  EXPECT_EQ(u.chat_turns, s.chat_turns);
  AppState w;
  ASSERT_TRUE(settings_from_json(R"({"chat": {"on": 1, "turns": [{"role": "user", "content": "a"}, {"role": 2}, "x"]}})", w, vis));
  EXPECT_FALSE(w.chat);  // not a bool: ignored
  EXPECT_EQ(w.chat_turns, (std::vector<ChatTurn>{{"user", "a"}}));
}
