#include "ui/panels/text_view_panel.h"

#include <GLFW/glfw3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ui/panels/export_box.h"
#include "ui/draw/imgui_util.h"
#include "ui/state/window_paint.h"

namespace attnviz::ui {

namespace {

// Hovering previews a query's weights in the modes that read a layer's heads at most (H
// rows); over every layer (L·H rows) a click selects, so moving the mouse stays smooth.
// Logit attribution runs a job per query: a click selects.
bool hover_previews(TextViewMode m, bool attribution) {
  return !attribution && m != TextViewMode::AllMean && m != TextViewMode::AllMax;
}

Rgb8 to_rgb8(const ImVec4& c) {
  return {static_cast<uint8_t>(std::lround(c.x * 255.f)), static_cast<uint8_t>(std::lround(c.y * 255.f)),
          static_cast<uint8_t>(std::lround(c.z * 255.f))};
}

// The text view's colours for a token: background (alpha 0: none) and text.
struct TokenColors {
  ImU32 bg, fg;
};
TokenColors token_colors(const TokenShade& t) {
  switch (t.mark) {
    case TokenMark::Key: {
      const Rgb8 c = shade_rgb(t.shade, to_rgb8(ImGui::GetStyle().Colors[ImGuiCol_WindowBg]));
      return {to_u32(c), std::abs(t.shade) > 0.55f ? IM_COL32(15, 15, 15, 255) : ImGui::GetColorU32(ImGuiCol_Text)};
    }
    case TokenMark::Future: return {0, ImGui::GetColorU32(ImGuiCol_TextDisabled)};
    case TokenMark::OutsideWindow: return {to_u32(kOutsideWindowRgb), IM_COL32(235, 220, 195, 255)};
    case TokenMark::Dropped: return {IM_COL32(60, 60, 60, 255), IM_COL32(150, 150, 150, 255)};
  }
  return {0, 0};
}

}  // namespace

void TextViewPanel::draw_content(FrameContext& ctx) {
  const Trace& tr = ctx.trace;
  AppState& s = ctx.state;
  const int T = tr.T();
  // The selected query (the last token when none is chosen or the text got shorter); the
  // hovered token's weights while the mouse rests on one.
  const int pinned = clamp_query(s.query, T);
  const int query = hover_pos_ >= 0 && hover_pos_ < T && hover_previews(mode_, attribution_) ? hover_pos_ : pinned;
  focused_ = ImGui::IsWindowFocused(ImGuiFocusedFlags_RootAndChildWindows);
  const ImGuiIO& io = ImGui::GetIO();
  if (focused_ && !io.KeyAlt && !io.KeyCtrl && !io.WantTextInput && !layout_.x.empty()) {
    const int k = tr.dropped + pinned;  // the query as a token of the text
    if (ImGui::IsKeyPressed(GLFW_KEY_LEFT)) move_query(ctx, pinned - 1);
    if (ImGui::IsKeyPressed(GLFW_KEY_RIGHT)) move_query(ctx, pinned + 1);
    if (ImGui::IsKeyPressed(GLFW_KEY_UP)) move_query(ctx, token_on_next_line(layout_, k, -1) - tr.dropped);
    if (ImGui::IsKeyPressed(GLFW_KEY_DOWN)) move_query(ctx, token_on_next_line(layout_, k, +1) - tr.dropped);
    if (ImGui::IsKeyPressed(GLFW_KEY_HOME)) move_query(ctx, 0);
    if (ImGui::IsKeyPressed(GLFW_KEY_END)) move_query(ctx, T - 1);
  }
  const TextShading& sh = attribution_ ? attribution_shading(ctx, query)
                                       : cache_.get(tr, ctx.snap.trace_serial, s.layer, s.head, query, mode_);
  shown_ = &sh;
  draw_controls(ctx, sh, query);
  draw_export(ctx, sh, query);
  draw_text(ctx, sh);
}

const TextShading& TextViewPanel::attribution_shading(const FrameContext& ctx, int query) {
  const Trace& tr = ctx.trace;
  AttributionQuery q;
  q.model = ctx.snap.model;
  q.trace = ctx.snap.trace;
  q.position = query;
  q.keys = true;
  if (query >= 0 && q.trace.get() == &tr) attribution_job_.request(q);
  const AttributionJob::Status st = attribution_job_.status();
  attribution_ready_ = st.keys && st.query == q;
  attribution_done_ = attribution_ready_ || (!st.running && !st.error.empty() && st.query == q);
  if (!attribution_ready_) {
    attribution_note_ = !st.error.empty() ? st.error : st.running ? "computing the logit attribution\xE2\x80\xA6" : "";
    std::vector<float> none(static_cast<size_t>(std::max(tr.T(), 0)), 0.f);
    attribution_sh_ = shade_tokens(none.data(), tr.T(), query, tr.dropped, marked_window(tr, ctx.state.layer, mode_), 3, true);
    attribution_key_ = AttributionKey{};
    return attribution_sh_;
  }
  const AttributionKey key{st.keys.get(), ctx.state.layer, ctx.state.head, mode_};
  if (!(key == attribution_key_)) {
    key_shares(*st.keys, ctx.state.layer, ctx.state.head, mode_, shares_);
    attribution_sh_ = shade_tokens(shares_.data(), tr.T(), query, tr.dropped, marked_window(tr, ctx.state.layer, mode_), 3, true);
    attribution_key_ = key;
  }
  std::string what = "'" + chip_label(token_text(ctx.model, st.keys->target_ids[0])) + "'";
  char b[160];
  double total = 0;
  for (float v : shares_) total += v;
  std::snprintf(b, sizeof b, " (logit %.3f at query %d; these keys carry %.3f of it)", st.keys->logit, query, total);
  attribution_note_ = "shares of the logit of " + what + b;
  return attribution_sh_;
}

nlohmann::json TextViewPanel::sidecar() const {
  nlohmann::json j = {{"shade_by", attribution_ ? "attribution" : "attention"},
                      {"ready", attribution_ && attribution_ready_},
                      {"note", attribution_ ? attribution_note_ : std::string()}};
  j["query"] = shown_ ? shown_->query : -1;
  j["strongest"] = shown_ && !shown_->top_keys.empty()
                       ? shown_->tokens[static_cast<size_t>(shown_->dropped + shown_->top_keys[0])].weight
                       : 0.f;
  return j;
}

void TextViewPanel::move_query(FrameContext& ctx, int query) {
  // Never past either end of the window (a cropped token cannot be a query).
  ctx.state.query = std::clamp(query, 0, std::max(0, ctx.trace.T() - 1));
  hover_pos_ = -1;
}

void TextViewPanel::draw_controls(FrameContext& ctx, const TextShading& sh, int query) {
  const AppState& s = ctx.state;
  const ModelConfig& c = ctx.model->config;
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 9.f);
  if (ImGui::BeginCombo("##shade", attribution_ ? "logit attribution" : "attention weights")) {
    if (ImGui::Selectable("attention weights", !attribution_)) attribution_ = false;
    if (ImGui::Selectable("logit attribution", attribution_)) attribution_ = true;
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  int m = static_cast<int>(mode_);
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 15.f);
  if (ImGui::BeginCombo("##weights", text_view_mode_label(mode_, attribution_))) {
    for (int i = 0; i < kTextViewModes; ++i) {
      const auto mi = static_cast<TextViewMode>(i);
      if (attribution_ && (mi == TextViewMode::LayerMax || mi == TextViewMode::AllMax)) continue;  // sums like the means
      if (ImGui::Selectable(text_view_mode_label(mi, attribution_), i == m)) mode_ = mi;
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  const bool all = mode_ == TextViewMode::AllMean || mode_ == TextViewMode::AllMax;
  if (all && c.any_linear()) ImGui::Text("the softmax layers' heads");
  else if (all) ImGui::Text("%d layers \xC3\x97 %d heads", c.n_layer, c.n_head);
  else if (c.layer(s.layer).mixer == Mixer::ShortConv) ImGui::Text("layer %d: a convolution, no weights", s.layer);
  else if (c.layer(s.layer).mixer == Mixer::GatedDeltaNet && mode_ == TextViewMode::Head)
    ImGui::Text("layer %d \xC2\xB7 head %d \xC2\xB7 A (orange +, blue \xE2\x88\x92)", s.layer, s.head);
  else if (mode_ == TextViewMode::Head) ImGui::Text("layer %d \xC2\xB7 head %d", s.layer, s.head);
  else ImGui::Text("layer %d \xC2\xB7 %d heads", s.layer, c.heads_at(s.layer));
  ImGui::SameLine();
  const int k = sh.dropped + query;
  const std::string lab = k >= 0 && k < static_cast<int>(pieces_.size()) ? pieces_[static_cast<size_t>(k)].text : "";
  ImGui::TextDisabled("\xC2\xB7 query %d '%s'%s", query, lab.c_str(), query != clamp_query(s.query, ctx.trace.T()) ? " (hovered)" : "");
  if (!all && s.layer < c.n_layer && c.layer(s.layer).window > 0) {
    const SeenKeys sk = seen_keys(std::max(query, 0), c.layer(s.layer).window);
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(0.f, 0.9f, 0.67f, 1.f), "\xC2\xB7 local W=%d: keys [%d, %d]", sk.window, sk.first, sk.last);
  }
  ImGui::SameLine();
  help_marker("Each token's background: the weight it receives from the query (framed in yellow), relative to the "
              "largest weight of the row. With \"logit attribution\": its share of the logit of the token the "
              "query predicts, carried by the heads' attention (a_ij times its value through the "
              "head's rows of W_O and the unembedding, the final norm frozen), orange for and blue against; a "
              "click selects the query. Pale tokens come after the query (the causal mask), brown ones lie outside "
              "a local layer's window, grey ones were cropped by block_size.\n"
              "Hover a token to see its weights (over all layers: click), click to select it; with the panel "
              "focused, \xE2\x86\x90/\xE2\x86\x92 move the query by a token, \xE2\x86\x91/\xE2\x86\x93 by a line, Home/End "
              "to the first/last.");
  if (attribution_ && !attribution_note_.empty()) {  // what the shades are, or why there are none (in red)
    const bool failed = attribution_done_ && !attribution_ready_;
    ImGui::PushStyleColor(ImGuiCol_Text, failed ? ImVec4(1.f, 0.4f, 0.4f, 1.f) : ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%s", attribution_note_.c_str());
    ImGui::PopStyleColor();
  }
}

void TextViewPanel::draw_export(const FrameContext& ctx, const TextShading& sh, int query) {
  export_.draw([&](const std::string& path) {
    TextViewDoc doc;
    const int k = sh.dropped + query;
    doc.title = text_view_title(ctx.model->name, ctx.state.layer, ctx.state.head, mode_, query,
                                k >= 0 && k < static_cast<int>(pieces_.size()) ? pieces_[static_cast<size_t>(k)].text : "");
    if (attribution_) doc.title += " \xC2\xB7 " + attribution_note_;
    doc.pieces = pieces_;
    doc.shading = sh;
    return write_text_view(doc, path);
  });
}

void TextViewPanel::update_layout(const FrameContext& ctx, float width) {
  const float fs = ImGui::GetFontSize();
  const Trace& tr = ctx.trace;
  const size_t n = static_cast<size_t>(tr.dropped) + tr.tokens.size();
  if (ctx.snap.trace_serial == layout_serial_ && std::abs(width - layout_width_) < 0.5f && fs == layout_font_ &&
      pieces_.size() == n)
    return;
  if (ctx.snap.all_ids.size() == n) {
    pieces_ = doc_pieces(ctx.snap.labels, ctx.snap.all_ids, ctx.model);
  } else {  // the labels are of another text: the window's own tokens, the cropped ones unnamed
    pieces_.assign(static_cast<size_t>(tr.dropped), DocPiece{"\xE2\x80\xA6", false});
    for (const DocPiece& p : doc_pieces({}, tr.tokens, ctx.model)) pieces_.push_back(p);
  }
  // Each token as wide as its text (plus a pixel between backgrounds): the text reads as a
  // document, spaces are the tokens' own.
  std::vector<float> widths(pieces_.size());
  for (size_t k = 0; k < pieces_.size(); ++k)
    widths[k] = std::max(ImGui::CalcTextSize(pieces_[k].text.c_str()).x, fs * 0.3f) + 1.f;
  layout_ = wrap_tokens(widths, pieces_, width);
  layout_serial_ = ctx.snap.trace_serial;
  layout_width_ = width;
  layout_font_ = fs;
}

void TextViewPanel::draw_text(FrameContext& ctx, const TextShading& sh) {
  AppState& s = ctx.state;
  const float fs = ImGui::GetFontSize();
  const float line_h = std::round(fs * 1.6f);
  ImGui::BeginChild("document", ImVec2(0, 0), true);
  const float width = std::max(fs * 4.f, ImGui::GetContentRegionAvail().x - fs * 0.3f);
  update_layout(ctx, width);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();  // the top of line 0 (scrolled)
  const int pinned = clamp_query(s.query, ctx.trace.T());
  const ImU32 query_col = IM_COL32(255, 220, 0, 255);
  ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(ImGui::GetStyle().ItemSpacing.x, 0.f));  // lines line_h apart
  ImGuiListClipper clip;
  clip.Begin(layout_.lines(), line_h);
  while (clip.Step()) {
    for (int line = clip.DisplayStart; line < clip.DisplayEnd; ++line) {
      const float y = origin.y + static_cast<float>(line) * line_h;
      for (int k = layout_.line_start[static_cast<size_t>(line)]; k < layout_.line_start[static_cast<size_t>(line) + 1]; ++k) {
        if (k >= static_cast<int>(sh.tokens.size())) break;
        const ImVec2 a(origin.x + layout_.x[static_cast<size_t>(k)], y + fs * 0.2f);
        const ImVec2 b(a.x + layout_.w[static_cast<size_t>(k)] - 1.f, y + line_h - fs * 0.2f);
        const TokenColors col = token_colors(sh.tokens[static_cast<size_t>(k)]);
        if (col.bg) dl->AddRectFilled(a, b, col.bg, 3.f);
        dl->AddText(ImVec2(a.x, y + (line_h - fs) * 0.5f), col.fg, pieces_[static_cast<size_t>(k)].text.c_str());
        const int pos = k - sh.dropped;
        if (pos == sh.query) dl->AddRect(a - ImVec2(1, 1), b + ImVec2(1, 1), query_col, 3.f, 0, 2.f);
        else if (pos == pinned) dl->AddRect(a - ImVec2(1, 1), b + ImVec2(1, 1), query_col & IM_COL32(255, 255, 255, 110), 3.f);
      }
      ImGui::Dummy(ImVec2(width, line_h));
    }
  }
  ImGui::PopStyleVar();
  text_rect_ = ImVec4(ImGui::GetWindowPos().x, ImGui::GetWindowPos().y, ImGui::GetWindowSize().x, ImGui::GetWindowSize().y);

  // The token under the mouse: its weights (shown from the next frame), a tooltip, a click selects it.
  hover_pos_ = -1;
  if (ImGui::IsWindowHovered()) {
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const int line = static_cast<int>(std::floor((mp.y - origin.y) / line_h));
    if (line >= 0 && line < layout_.lines())
      for (int k = layout_.line_start[static_cast<size_t>(line)]; k < layout_.line_start[static_cast<size_t>(line) + 1]; ++k) {
        const float x0 = origin.x + layout_.x[static_cast<size_t>(k)];
        if (mp.x < x0 || mp.x >= x0 + layout_.w[static_cast<size_t>(k)]) continue;
        const int pos = k - sh.dropped;
        if (pos >= 0) {
          hover_pos_ = pos;
          s.hover(pos);  // every panel highlights it too
          if (ImGui::IsMouseClicked(0)) move_query(ctx, pos);
        }
        token_tooltip(ctx, sh, k);
        break;
      }
  }

  // Keep the query, and its strongest key when both fit, in view: for a few frames after a
  // new query or view (until the lines it needs are measured and shown), then the scroll is
  // the user's again.
  const Follow now{pinned, s.layer, s.head, ctx.snap.trace_serial, mode_, attribution_ready_ && attribution_};
  if (now != followed_) {
    followed_ = now;
    follow_frames_ = 8;
  }
  const int qk = sh.dropped + pinned;
  if (follow_frames_ > 0 && qk >= 0 && qk < static_cast<int>(layout_.line_of.size())) {
    --follow_frames_;
    const int ql = layout_.line_of[static_cast<size_t>(qk)];
    int l0 = ql, l1 = ql;
    const float view_h = ImGui::GetWindowHeight() - 2.f * ImGui::GetStyle().WindowPadding.y;
    if (sh.query == pinned && !sh.top_keys.empty()) {
      const int kl = layout_.line_of[static_cast<size_t>(sh.dropped + sh.top_keys[0])];
      if (static_cast<float>(std::abs(kl - ql) + 1) * line_h <= view_h) l0 = std::min(ql, kl), l1 = std::max(ql, kl);
    }
    // Line l is in view when l·line_h − scroll lies in [0, view_h] (both below the padding).
    const float top = static_cast<float>(l0) * line_h, bottom = static_cast<float>(l1 + 1) * line_h;
    const float sy = ImGui::GetScrollY();
    if (top < sy || bottom > sy + view_h)
      ImGui::SetScrollY(std::max(0.f, 0.5f * (top + bottom - view_h)));
    else
      follow_frames_ = 0;  // in view: done
  }
  ImGui::EndChild();
}

void TextViewPanel::token_tooltip(const FrameContext& ctx, const TextShading& sh, int k) const {
  const TokenShade& t = sh.tokens[static_cast<size_t>(k)];
  const std::string& lab = pieces_[static_cast<size_t>(k)].text;
  const int pos = k - sh.dropped;
  ImGui::BeginTooltip();
  switch (t.mark) {
    case TokenMark::Dropped:
      ImGui::Text("'%s' was cropped by block_size %d: the model never saw it", lab.c_str(), ctx.trace.block_size);
      break;
    case TokenMark::Future:
      ImGui::Text("'%s' (position %d) comes after query %d: the causal mask hides it", lab.c_str(), pos, sh.query);
      break;
    case TokenMark::OutsideWindow:
      ImGui::Text("'%s' (position %d) lies outside the window of %d keys query %d sees", lab.c_str(), pos, sh.window,
                  sh.query);
      break;
    case TokenMark::Key:
      if (sh.signed_shares && !attribution_) {  // a linear-attention layer's row of A
        ImGui::Text("'%s' (position %d): A[%d, %d] = %+.4f, how much of its value reaches query %d (%.0f%% of the "
                    "largest |A|)",
                    lab.c_str(), pos, sh.query, pos, static_cast<double>(t.weight), sh.query,
                    100.0 * std::abs(static_cast<double>(t.shade)));
        break;
      }
      if (sh.signed_shares) {
        ImGui::Text("'%s' (position %d) carries %+.4f of the logit at query %d (%.0f%% of the largest |share|, %.4f)",
                    lab.c_str(), pos, static_cast<double>(t.weight), sh.query, 100.0 * std::abs(static_cast<double>(t.shade)),
                    static_cast<double>(sh.max_weight));
        break;
      }
      ImGui::Text("'%s' (position %d) receives %.4f from query %d (%.0f%% of the largest, %.4f)", lab.c_str(), pos,
                  static_cast<double>(t.weight), sh.query, 100.0 * static_cast<double>(t.shade),
                  static_cast<double>(sh.max_weight));
      break;
  }
  if (pos >= 0) ImGui::TextDisabled("%s", !hover_previews(mode_, attribution_)
                                              ? "click: make it the query"
                                              : "its own weights are shown while hovered; click: make it the query");
  ImGui::EndTooltip();
}

}  // namespace attnviz::ui
