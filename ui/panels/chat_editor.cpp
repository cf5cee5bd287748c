#include "ui/panels/chat_editor.h"

#include <imgui_stdlib.h>

#include <algorithm>
#include <string>

#include "ui/state/app_state.h"
#include "ui/draw/imgui_util.h"
#include "ui/panels/panel.h"

namespace attnviz::ui {

namespace {
const char* const kRoles[] = {"system", "user", "assistant"};
}  // namespace

void draw_chat_editor(FrameContext& ctx, ImVec2 size) {
  AppState& s = ctx.state;
  const float fs = ImGui::GetFontSize();
  if (!ImGui::BeginChild("chat", size, true)) {
    ImGui::EndChild();
    return;
  }
  int remove = -1;
  for (size_t i = 0; i < s.chat_turns.size(); ++i) {
    ChatTurn& t = s.chat_turns[i];
    ImGui::PushID(static_cast<int>(i));
    // The role: a coloured mark, then a combo of the usual three.
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + fs * 0.3f, p.y + ImGui::GetFrameHeight()), role_color(t.role));
    ImGui::SetCursorScreenPos(ImVec2(p.x + fs * 0.5f, p.y));
    ImGui::SetNextItemWidth(fs * 7.f);
    if (ImGui::BeginCombo("##role", t.role.c_str())) {
      for (const char* r : kRoles)
        if (ImGui::Selectable(r, t.role == r)) t.role = r;
      ImGui::EndCombo();
    }
    ImGui::SameLine();
    if (ImGui::SmallButton("delete")) remove = static_cast<int>(i);
    // As tall as its lines (one to four), so several turns fit the panel.
    const int lines = std::min(4, 1 + static_cast<int>(std::count(t.content.begin(), t.content.end(), '\n')));
    const float h = static_cast<float>(lines) * ImGui::GetTextLineHeight() + ImGui::GetStyle().FramePadding.y * 2.f + 2.f;
    ImGui::InputTextMultiline("##content", &t.content, ImVec2(-1, h));
    ImGui::PopID();
  }
  if (remove >= 0) s.chat_turns.erase(s.chat_turns.begin() + remove);
  for (const char* r : kRoles) {
    if (ImGui::SmallButton((std::string("+ ") + r).c_str())) s.chat_turns.push_back(ChatTurn{r, ""});
    ImGui::SameLine();
  }
  ImGui::Checkbox("generation prompt", &s.chat_generation_prompt);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("End with the template's generation prompt (the assistant's turn opened), as a chat\n"
                      "application does before the model replies: Next token's step / play then writes the reply.");

  if (ctx.chat) {
    const ChatRendering& r = ctx.chat->rendering;
    if (!r.error.empty()) {
      error_line(r.error);
    } else {
      // The reply generated after the rendered prompt.
      const bool has_reply = s.text.size() > r.text.size() && s.text.compare(0, r.text.size(), r.text) == 0;
      if (has_reply) {
        const std::string reply = s.text.substr(r.text.size());
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(role_color("assistant")), "reply so far:");
        ImGui::SameLine();
        ImGui::TextWrapped("%s", reply.c_str());
        if (ImGui::SmallButton("keep the reply as an assistant turn")) {
          s.chat_turns.push_back(ChatTurn{"assistant", reply});
        }
      } else {
        ImGui::TextDisabled("Next token: step / play writes the reply after the prompt.");
      }
      if (ImGui::CollapsingHeader("rendered text (what the model reads)")) {
        std::string shown = r.text;  // read-only copy
        ImGui::InputTextMultiline("##rendered", &shown, ImVec2(-1, fs * 6.f), ImGuiInputTextFlags_ReadOnly);
      }
    }
  } else if (!ctx.model) {
    ImGui::TextDisabled("waiting for the model: its chat template renders the turns");
  }
  ImGui::EndChild();
}

}  // namespace attnviz::ui
