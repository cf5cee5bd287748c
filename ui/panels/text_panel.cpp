#include "ui/panels/text_panel.h"

#include <imgui_stdlib.h>

#include "core/model/paths.h"
#include "ui/state/app_state.h"
#include "ui/panels/chat_editor.h"
#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

TextPanel::TextPanel(std::string random_model_dir) : Panel("Text & model"), random_dir_(std::move(random_model_dir)) {
  builtins_ = builtin_models();
}

void TextPanel::draw_content(FrameContext& ctx) {
  AppState& s = ctx.state;
  const Snapshot& snap = ctx.snap;
  const float fs = ImGui::GetFontSize();

  if (snap.random_weights) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.f, 0.6f, 0.2f, 1.f));
    ImGui::TextWrapped("RANDOM WEIGHTS: untrained, so the attention patterns are noise.");
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("No trained model was found, so attnviz generated a random one.\n"
                        "Open a trained model (a directory or builtin:NAME) to see learned attention.");
    ImGui::PopStyleColor();
  }

  // --- model
  std::string current = s.model_spec;
  if (!random_dir_.empty() && s.model_spec == random_dir_) current = "random tiny (generated)";
  ImGui::PushItemWidth(-fs * 4.f);
  if (ImGui::BeginCombo("model", current.c_str())) {
    for (const auto& n : builtins_) {
      const std::string spec = "builtin:" + n;
      if (ImGui::Selectable(spec.c_str(), s.model_spec == spec)) s.open_request = spec;
    }
    if (!random_dir_.empty() && ImGui::Selectable("random tiny (generated)", s.model_spec == random_dir_))
      s.open_request = random_dir_;
    if (builtins_.empty()) ImGui::TextDisabled("no built-in models found");
    ImGui::EndCombo();
  }
  const bool enter = ImGui::InputTextWithHint("##dir", "model directory (config.json + model.safetensors) or FILE.gguf", &path_,
                                              ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::PopItemWidth();
  ImGui::SameLine();
  // Loaded off the UI thread (the App's ModelLoader): the model shown stays until it is ready.
  if ((ImGui::Button("open") || enter) && !path_.empty()) s.open_request = path_;

  // --- backend
  ImGui::TextUnformatted("backend");
  ImGui::SameLine();
  if (ImGui::RadioButton("cpu", s.backend == "cpu")) s.backend = "cpu";
  ImGui::SameLine();
  if (ImGui::RadioButton("gpu", s.backend == "gpu")) s.backend = "gpu";
  ImGui::SameLine();
  ImGui::TextDisabled("running: %s", snap.backend_name.empty() ? "…" : snap.backend_name.c_str());
  if (!snap.backend_note.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.f, 0.8f, 0.3f, 1.f));
    ImGui::TextWrapped("GPU unavailable, using the CPU: %s", snap.backend_note.c_str());
    ImGui::PopStyleColor();
  }

  // --- text, or the chat rendered through the model's template
  if (ImGui::RadioButton("text", !s.chat)) s.chat = false;
  ImGui::SameLine();
  if (ImGui::RadioButton("chat", s.chat)) {
    if (!s.chat && s.chat_turns.empty()) s.chat_turns.push_back(ChatTurn{"user", s.text});  // the text becomes the first turn
    s.chat = true;
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Chat: turns rendered through the model's own chat template (turn markers and special\n"
                      "tokens included), as the model reads them in a chat application.");
  ImGui::SameLine();
  ImGui::TextDisabled(s.chat ? "(the turns re-render on each edit)" : "(each keystroke recomputes)");
  const std::string sample = ctx.model && !s.chat ? sample_text(ctx.model->dir) : std::string();
  if (!sample.empty()) {
    ImGui::SameLine();
    if (ImGui::SmallButton("sample")) s.text = sample;
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Replace the text with this model's own example:\n%s", sample.c_str());
  }
  if (focus_) {
    ImGui::SetKeyboardFocusHere();
    focus_ = false;
  }
  const float other_h = ImGui::GetFrameHeightWithSpacing();  // the other prompt's line under the text
  const float err_h = other_h + (snap.error.empty() ? 0.f : fs * 4.5f) +
                      (snap.skipped.empty() ? 0.f : fs * (snap.showing_sample ? 3.8f : 2.6f));
  const ImVec2 box(-1, std::max(fs * 3.f, ImGui::GetContentRegionAvail().y - err_h));
  if (s.chat) draw_chat_editor(ctx, box);
  else ImGui::InputTextMultiline("##text", &s.text, box);
  // Prompt B, run through the same model for the Compare prompts and Activation patching panels.
  ImGui::SetNextItemWidth(-1);
  ImGui::InputTextWithHint("##other", "other prompt (B), to compare and patch with the text", &s.other_text);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Prompt B: the Compare prompts panel shows its attention beside the text's (A), the Next token\n"
                      "panel its prediction, and Activation patching puts its activations into A's run (View menu).");

  if (!snap.skipped.empty()) {  // characters the vocabulary lacks: left out, the rest still runs
    std::string chars;
    for (size_t i = 0; i < snap.skipped.size() && i < 12; ++i) chars += (i ? " " : "") + chip_label(snap.skipped[i]);
    if (snap.skipped.size() > 12) chars += " \xE2\x80\xA6";
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.f, 0.7f, 0.3f, 1.f));
    if (snap.showing_sample)
      ImGui::TextWrapped("none of these characters is in the vocabulary: %s. Showing the model's sample text; "
                         "press \"sample\" to type into it.", chars.c_str());
    else
      ImGui::TextWrapped("skipped %d character%s not in the vocabulary: %s", snap.skipped_count,
                         snap.skipped_count == 1 ? "" : "s", chars.c_str());
    ImGui::PopStyleColor();
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("This model has no token for these characters, so they are left out of the tokens\n"
                        "(the text box keeps them). Type text in the model's language, or press \"sample\".");
  }
  if (!snap.error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.f, 0.45f, 0.4f, 1.f));
    ImGui::TextWrapped("%s", snap.error.c_str());
    ImGui::PopStyleColor();
    if (snap.trace) ImGui::TextDisabled("showing the last good result");
  }
}

}  // namespace attnviz::ui
