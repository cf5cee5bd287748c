#include "ui/panels/panel.h"

#include <imgui_internal.h>  // a child window's content extent and scrollbars (what was cut off)

namespace attnviz::ui {

const std::vector<HeadScore>& HeadScoreCache::get(const Trace& t, uint64_t serial) {
  if (computed_ == 0 || serial != serial_ || &t != trace_) {
    scores_ = score_heads(t);
    serial_ = serial;
    trace_ = &t;
    ++computed_;
  }
  return scores_;
}

const std::vector<HeadScore>& FrameContext::head_scores() const {
  return (head_score_cache ? *head_score_cache : own_scores).get(trace, snap.trace_serial);
}

void Panel::place(ImVec2 pos, ImVec2 size, bool force) {
  pos_ = pos;
  size_ = size;
  has_place_ = true;
  force_place_ = force_place_ || force;
}

void Panel::draw(FrameContext& ctx) {
  window_rect_ = ImVec4(0, 0, 0, 0);
  if (!open_) return;
  if (has_place_) {
    const ImGuiCond cond = force_place_ ? ImGuiCond_Always : ImGuiCond_FirstUseEver;
    ImGui::SetNextWindowPos(pos_, cond);
    ImGui::SetNextWindowSize(size_, cond);
    force_place_ = false;
  }
  const bool visible =
      ImGui::Begin(title_.c_str(), &open_, window_flags() | (background_ ? 0 : ImGuiWindowFlags_NoBackground));
  window_rect_ = ImVec4(ImGui::GetWindowPos().x, ImGui::GetWindowPos().y, ImGui::GetWindowSize().x, ImGui::GetWindowSize().y);
  if (visible) draw_body(ctx);
  ImGui::End();
}

void Panel::draw_in_tile(FrameContext& ctx, ImVec2 size) {
  window_rect_ = ImVec4(0, 0, 0, 0);
  if (!open_) return;
  // Content wider than the tile scrolls sideways rather than being cut off (unless the panel
  // sizes its content to the tile itself: no scrollbars).
  const ImGuiWindowFlags f = window_flags();
  const bool visible = ImGui::BeginChild(title_.c_str(), size, false,
                                         f | (f & ImGuiWindowFlags_NoScrollbar ? 0 : ImGuiWindowFlags_HorizontalScrollbar));
  window_rect_ = ImVec4(ImGui::GetWindowPos().x, ImGui::GetWindowPos().y, ImGui::GetWindowSize().x, ImGui::GetWindowSize().y);
  cut_.clear();
  if (visible) {
    draw_body(ctx);
    const ImGuiWindow* w = ImGui::GetCurrentWindow();
    const ImVec2 content(w->DC.CursorMaxPos.x - w->DC.CursorStartPos.x, w->DC.CursorMaxPos.y - w->DC.CursorStartPos.y);
    const ImVec2 inner = w->InnerRect.GetSize();
    if (content.x > inner.x + 2.f && !w->ScrollbarX) cut_ += "x";
    if (content.y > inner.y + 2.f && !w->ScrollbarY) cut_ += "y";
  }
  ImGui::EndChild();
}

void Panel::draw_body(FrameContext& ctx) {
  if (needs_trace() && !ctx.has_trace()) {
    if (!ctx.snap.error.empty()) ImGui::TextDisabled("no result yet (see the error in Text & model)");
    else if (ctx.busy_s >= 0.0) ImGui::TextDisabled("%s (%.1f s)", ctx.model || ctx.layers_total > 0 ? "computing\xE2\x80\xA6" : "loading the model\xE2\x80\xA6", ctx.busy_s);
    else ImGui::TextDisabled("computing\xE2\x80\xA6");
    return;
  }
  // A result older than what was asked for, while the new one computes: greyed.
  const bool grey = needs_trace() && ctx.stale();
  if (grey) ImGui::PushStyleVar(ImGuiStyleVar_Alpha, ImGui::GetStyle().Alpha * 0.55f);
  draw_content(ctx);
  if (grey) ImGui::PopStyleVar();
}

}  // namespace attnviz::ui
