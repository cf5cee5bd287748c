#include "ui/panels/status_bar.h"

#include <algorithm>
#include <string>

namespace attnviz::ui {

namespace {
void status_line(FrameContext& ctx) {
  const Snapshot& snap = ctx.snap;
  const Trace& tr = ctx.trace;
  if (!ctx.notice.empty()) {
    ImGui::TextColored(ImVec4(1.f, 0.6f, 0.2f, 1.f), "%s", ctx.notice.c_str());
    ImGui::SameLine(0, ImGui::GetFontSize() * 1.5f);
  }
  if (ctx.stale()) {  // the panels show the previous result, greyed, until this one is done
    ImGui::TextColored(ImVec4(1.f, 0.85f, 0.3f, 1.f), "computing\xE2\x80\xA6 (%.1f s)", ctx.busy_s);
    const bool hovered = ImGui::IsItemHovered();
    bool bar_hovered = false;
    if (ctx.layers_total > 0) {  // layers done of the forward in flight
      ImGui::SameLine();
      const std::string label = "layer " + std::to_string(ctx.layers_done) + " / " + std::to_string(ctx.layers_total);
      ImGui::ProgressBar(static_cast<float>(ctx.layers_done) / static_cast<float>(ctx.layers_total),
                         ImVec2(ImGui::GetFontSize() * 9.f, 0.f), label.c_str());
      bar_hovered = ImGui::IsItemHovered();
    }
    if (hovered || bar_hovered)
      ImGui::SetTooltip("The panels show the previous result (greyed) until the new one is ready.\nTyping goes on: "
                        "a newer edit stops this computation after its current layer, and only the newest text is "
                        "computed.");
    ImGui::SameLine(0, ImGui::GetFontSize() * 1.5f);
  }
  ImGui::Text("forward %.2f ms (from position %d)", snap.forward_ms, snap.recomputed_from);
  if (snap.device_ms >= 0) {
    ImGui::SameLine();
    ImGui::TextDisabled("GPU %.2f ms", snap.device_ms);
  }
  ImGui::SameLine(0, ImGui::GetFontSize() * 1.5f);
  ImGui::Text("frame %.1f ms", ctx.frame_ms);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("time to build and draw the last frame; the window sleeps while nothing changes");
  ImGui::SameLine(0, ImGui::GetFontSize() * 1.5f);
  ImGui::Text("T %d / block %d", tr.T(), tr.block_size);
  ImGui::SameLine(0, ImGui::GetFontSize() * 1.5f);
  if (tr.dropped > 0)
    ImGui::TextColored(ImVec4(1.f, 0.65f, 0.3f, 1.f), "dropped %d", tr.dropped);
  else
    ImGui::Text("dropped 0");
  ImGui::SameLine(0, ImGui::GetFontSize() * 1.5f);
  ImGui::Text("backend %s", snap.backend_name.empty() ? "…" : snap.backend_name.c_str());
  if (ctx.model && ctx.model->weights.any_stored()) {  // which arithmetic multiplied the stored weights
    ImGui::SameLine();
    ImGui::TextDisabled("%s products", tr.arith.c_str());
  }
  ImGui::SameLine(0, ImGui::GetFontSize() * 1.5f);
  if (snap.random_weights) {
    ImGui::TextColored(ImVec4(1.f, 0.6f, 0.2f, 1.f), "random weights");
    ImGui::SameLine(0, ImGui::GetFontSize() * 1.5f);
  }
  if (ctx.model && !ctx.model->warnings.empty()) {  // e.g. NaN or infinite weights, naming the tensor
    const auto& w = ctx.model->warnings;
    ImGui::TextColored(ImVec4(1.f, 0.6f, 0.2f, 1.f), "warning: %s%s", w.front().c_str(),
                       w.size() > 1 ? " (and more: hover)" : "");
    if (w.size() > 1 && ImGui::IsItemHovered()) {
      std::string all;
      for (const auto& line : w) all += line + "\n";
      ImGui::SetTooltip("%s", all.c_str());
    }
    ImGui::SameLine(0, ImGui::GetFontSize() * 1.5f);
  }
  if (!snap.error.empty()) {
    ImGui::TextColored(ImVec4(1.f, 0.45f, 0.4f, 1.f), "error (see Text & model)");
    ImGui::SameLine(0, ImGui::GetFontSize() * 1.5f);
  }
  ImGui::TextDisabled("%s", ctx.model ? ctx.model->name.c_str() : "loading model…");
}

}  // namespace

void draw_status_bar(FrameContext& ctx, ImVec2 pos, ImVec2 size) {
  ImGui::SetNextWindowPos(pos, ImGuiCond_Always);
  ImGui::SetNextWindowSize(size, ImGuiCond_Always);
  constexpr ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                                     ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBringToFrontOnFocus |
                                     ImGuiWindowFlags_NoFocusOnAppearing;
  if (ImGui::Begin("##status", nullptr, flags)) status_line(ctx);
  ImGui::End();
}

}  // namespace attnviz::ui
