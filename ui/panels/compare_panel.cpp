#include "ui/panels/compare_panel.h"

#include <algorithm>
#include <cmath>

#include "ui/draw/imgui_util.h"
#include "ui/state/window_paint.h"

namespace attnviz::ui {

namespace {
void message_line(const std::string& s, ImVec4 colour) {
  if (s.empty()) return;
  ImGui::PushStyleColor(ImGuiCol_Text, colour);
  ImGui::TextWrapped("%s", s.c_str());
  ImGui::PopStyleColor();
}
const ImVec4 kErrorColour(1.f, 0.45f, 0.4f, 1.f), kNoteColour(1.f, 0.75f, 0.3f, 1.f);
}  // namespace

void ComparePanel::draw_content(FrameContext& ctx) {
  shown_ = Shown{};
  matrix_rect_ = ImVec4(0, 0, 0, 0);
  const AppState& s = ctx.state;
  for (CompareView v : {CompareView::A, CompareView::B, CompareView::Difference}) {
    if (ImGui::RadioButton(compare_view_label(v), view_ == v)) view_ = v;
    ImGui::SameLine();
  }
  help_marker("The selected layer and head's attention weights (softmax) on prompt A (the text), on prompt B (the "
              "other prompt, typed under the text in Text & model), or A \xE2\x88\x92 B: red where A's query gives the "
              "key more weight than B's does, blue where less. Positions are aligned from the start of each window; "
              "when the prompts have different token counts, the first min(Ta, Tb) are compared. Hover a cell for "
              "both weights. Prompt B runs through the same model on a worker thread of its own.");
  ImGui::SameLine();
  ImGui::TextDisabled("layer %d, head %d", s.layer, s.head);
  shown_.view = view_;

  const Snapshot* other = other_.get();
  if (s.other_text.empty()) {
    shown_.message = "no other prompt yet: type prompt B under the text in Text & model";
    message_line(shown_.message, kNoteColour);
    return;
  }
  const bool b_ready = other && other->trace && other->model == ctx.snap.model && !other->showing_sample &&
                       other->trace->layers.size() == ctx.trace.layers.size();
  if (other && other->showing_sample)
    shown_.message = "none of prompt B's characters is in this model's vocabulary: type B in the model's language";
  else if (other && !other->error.empty())
    shown_.message = "prompt B: " + other->error;
  message_line(shown_.message, kErrorColour);
  if (!b_ready) {
    if (shown_.message.empty()) {
      shown_.message = "running prompt B\xE2\x80\xA6";
      ImGui::TextDisabled("%s", shown_.message.c_str());
    }
    return;
  }
  if (!other->skipped.empty())
    message_line("prompt B: " + std::to_string(other->skipped_count) + " character(s) not in the vocabulary left out",
                 kNoteColour);
  const Trace& b = *other->trace;
  shown_.ta = ctx.trace.T();
  shown_.tb = b.T();
  shown_.n = std::min(shown_.ta, shown_.tb);
  const std::string note = alignment_note(shown_.ta, shown_.tb);
  message_line(note, kNoteColour);
  if (shown_.message.empty()) shown_.message = note;
  const int d = first_difference(ctx.trace.tokens, b.tokens);
  if (d >= shown_.n) ImGui::TextDisabled("the first %d tokens are the same in A and B", shown_.n);
  else ImGui::TextDisabled("A and B (%d and %d tokens) first differ at position %d", shown_.ta, shown_.tb, d);
  if (ctx.trace.dropped > 0 || b.dropped > 0)
    ImGui::TextDisabled("windows: A drops its first %d tokens, B its first %d (block_size %d)", ctx.trace.dropped,
                        b.dropped, ctx.trace.block_size);
  if (other->trace_text != s.other_text) ImGui::TextDisabled("(prompt B as last computed; the newest is running)");
  if (ctx.model->config.layer(s.layer).mixer == Mixer::ShortConv)
    ImGui::TextDisabled("layer %d is a short convolution: no attention to compare; select another layer", s.layer);
  else if (shown_.n > 0)
    draw_matrix(ctx, b);
}

void ComparePanel::upload_if_changed(const FrameContext& ctx, const Trace& b) {
  const AppState& s = ctx.state;
  const Colormap cmap = view_ == CompareView::Difference ? Colormap::Diverging : s.probs_colormap;
  const Key key{ctx.snap.trace_serial, other_->trace_serial, s.layer, s.head, view_, cmap};
  if (key == key_ && tex_.valid()) return;
  key_ = key;
  const LayerTrace& la = ctx.trace.layers[static_cast<size_t>(s.layer)];
  const LayerTrace& lb = b.layers[static_cast<size_t>(s.layer)];
  const int ta = ctx.trace.T(), tb = b.T(), n = std::min(ta, tb);
  // A linear-attention layer compares its matrices A (signed), a softmax layer its weights.
  const bool linear = la.mixer == Mixer::GatedDeltaNet;
  const Stage st = linear ? Stage::Implicit : Stage::Probs;
  const float* pa = la.head_values(st, s.head, scratch_a_);  // (ta, ta)
  const float* pb = lb.head_values(st, s.head, scratch_b_);  // (tb, tb)
  a_values_ = aligned_attention(CompareView::A, pa, ta, pb, tb);       // (n, n)
  b_values_ = aligned_attention(CompareView::B, pa, ta, pb, tb);       // (n, n)
  shown_values_ = aligned_attention(view_, pa, ta, pb, tb);            // (n, n)
  const std::vector<float> diff = aligned_attention(CompareView::Difference, pa, ta, pb, tb);
  float m = 0.f;
  for (float v : diff) m = std::max(m, std::abs(v));
  max_abs_diff_ = m;
  range_ = view_ == CompareView::Difference ? ValueRange{-std::max(m, 1e-6f), std::max(m, 1e-6f), true}
           : linear                         ? symmetric_range(shown_values_.data(), static_cast<int64_t>(n) * n)
                                            : ValueRange{0.f, 1.f, true};
  colorize_rgba(linear ? Colormap::Diverging : cmap, shown_values_.data(), n, n, range_, rgba_, /*causal_mask=*/true);
  paint_outside_window(rgba_, n, n, la.window);
  tex_.upload(n, n, rgba_);
}

void ComparePanel::draw_matrix(FrameContext& ctx, const Trace& b) {
  upload_if_changed(ctx, b);
  shown_.max_abs_diff = max_abs_diff_;
  const int n = shown_.n;
  const Trace& a = ctx.trace;
  const float fs = ImGui::GetFontSize();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float legend_h = fs * 1.4f;
  // Token labels down the left when the rows are tall enough to read them.
  const float probe = std::floor(std::min(avail.x, avail.y - legend_h) / static_cast<float>(n));
  const bool labels = probe >= fs * 1.1f;
  const float left = labels ? std::round(fs * 7.f) : 0.f;
  // Whole pixels per cell while they fit, else fractions of a pixel (long prompts): the matrix
  // never runs past the panel.
  const float fit = std::max(1.f, std::min(avail.x - left, avail.y - legend_h));
  const float cell = fit >= n ? std::floor(fit / n) : fit / n;
  const float side = cell * static_cast<float>(n);
  const ImVec2 o = ImGui::GetCursorScreenPos(), m0 = o + ImVec2(left, 0);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImU32 tc = ImGui::GetColorU32(ImGuiCol_Text), warm = IM_COL32(255, 190, 80, 255);
  const auto label_a = [&](int i) { return chip_label_in_window(ctx.snap.labels, a, i, ctx.model); };
  const auto label_b = [&](int i) { return chip_label_in_window(other_->labels, b, i, ctx.model); };
  if (labels)
    for (int i = 0; i < n; ++i) {
      const bool same = a.tokens[static_cast<size_t>(i)] == b.tokens[static_cast<size_t>(i)];
      const std::string t = same ? label_a(i) : label_a(i) + " | " + label_b(i);
      const ImVec4 clip(o.x, o.y + i * cell, o.x + left - 4, o.y + (i + 1) * cell);
      dl->AddText(nullptr, 0.f, ImVec2(o.x + 2, o.y + i * cell + (cell - fs) * 0.5f), same ? tc : warm, t.c_str(), nullptr,
                  0.f, &clip);
    }
  ImGui::SetCursorScreenPos(m0);
  ImGui::Image(tex_.id(), ImVec2(side, side));
  matrix_rect_ = ImVec4(m0.x, m0.y, side, side);
  if (ImGui::IsItemHovered()) {
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const int i = std::clamp(static_cast<int>((mp.y - m0.y) / cell), 0, n - 1);
    const int j = std::clamp(static_cast<int>((mp.x - m0.x) / cell), 0, n - 1);
    const size_t k = static_cast<size_t>(i) * n + j;
    ImGui::BeginTooltip();
    ImGui::Text("query %d: A '%s', B '%s'", i, label_a(i).c_str(), label_b(i).c_str());
    ImGui::Text("key %d: A '%s', B '%s'", j, label_a(j).c_str(), label_b(j).c_str());
    if (j > i) ImGui::TextDisabled("masked: the key comes after the query (weight 0 in both)");
    else
      ImGui::Text("weight A %.4f, B %.4f, A \xE2\x88\x92 B %+.4f", a_values_[k], b_values_[k], a_values_[k] - b_values_[k]);
    ImGui::EndTooltip();
  }
  ImGui::SetCursorScreenPos(o + ImVec2(0, side + fs * 0.2f));
  if (view_ == CompareView::Difference)
    ImGui::TextDisabled("\xC2\xB1%.4f (red: more weight in A)", range_.hi);
  else
    ImGui::TextDisabled("weights of prompt %s, first %d positions; max |A \xE2\x88\x92 B| = %.4f", compare_view_label(view_), n,
                        max_abs_diff_);
}

}  // namespace attnviz::ui
