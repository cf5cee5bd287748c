// The text panel's Chat tab: the conversation's turns (a role and its content each; add,
// edit, delete), the generation prompt switch, the reply generated so far (Next token's
// step / play writes it) with a button that keeps it as an assistant turn, and the text the
// template rendered, special tokens included. Edits change AppState::chat_turns; the App
// renders them (ui/chat.h) into AppState::text.
#pragma once
#include <imgui.h>

namespace attnviz::ui {

struct FrameContext;

// Draws the editor in a child region of `size` (ImGui sizes: 0 or negative as usual).
void draw_chat_editor(FrameContext& ctx, ImVec2 size);

}  // namespace attnviz::ui
