#include "ui/panels/lens_panel.h"

#include <algorithm>
#include <cmath>

#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

namespace {
// The shade of a cell: the top token's probability, or how near the top the next token is.
float cell_shade(const LensCell& c, bool rank, int vocab) {
  if (!rank) return c.top_probs.empty() ? 0.f : c.top_probs[0];
  if (c.next_rank < 0) return -1.f;
  return 1.f - static_cast<float>(std::log1p(c.next_rank) / std::log(std::max(2, vocab)));
}
}  // namespace

void LensPanel::draw_content(FrameContext& ctx) {
  ImGui::Checkbox("rank of the next token", &show_rank_);
  ImGui::SameLine();
  help_marker("Each row is a position of the text, each column a layer: the residual stream after that layer at that "
              "position, put through the final norm and the unembedding (the logit lens). A cell shows the token it "
              "would predict, shaded by its probability (dark: unsure, yellow: sure). With the toggle, the cell "
              "shows instead the rank of the token that actually comes next (0: the lens puts it first). Hover a "
              "cell for the top 10. Only the rows in view are computed, on a thread of their own; the last column "
              "is the model's own prediction.");
  const int pending = job_.pending();
  if (!job_.idle() && pending > 0) {
    ImGui::SameLine();
    ImGui::TextDisabled("computing %d row%s\xE2\x80\xA6", pending, pending == 1 ? "" : "s");
  }
  const std::string err = job_.error();
  if (!err.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.f, 0.4f, 0.4f, 1.f));
    ImGui::TextWrapped("%s", err.c_str());
    ImGui::PopStyleColor();
  }
  const int T = ctx.trace.T();
  draw_grid(ctx, ctx.state.query < 0 ? T - 1 : std::min(ctx.state.query, T - 1));
}

void LensPanel::draw_grid(FrameContext& ctx, int query) {
  const Trace& tr = ctx.trace;
  const Model& m = *ctx.model;
  const int T = tr.T(), L = static_cast<int>(tr.layers.size()), V = m.config.vocab_size;
  const float fs = ImGui::GetFontSize();
  const float label_w = std::round(fs * 7.f), header_h = std::round(fs * 1.4f), row_h = std::round(fs * 1.35f);
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float cell_w = std::clamp(std::floor((avail.x - label_w - ImGui::GetStyle().ScrollbarSize) / L), std::round(fs * 2.f),
                                  std::round(fs * 6.f));
  grid_rect_ = ImVec4(0, 0, 0, 0);
  ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(0, 0));
  if (!ImGui::BeginChild("lens cells", avail, false, ImGuiWindowFlags_HorizontalScrollbar)) {
    ImGui::EndChild();
    ImGui::PopStyleVar();
    return;
  }
  // Follow the query when it or the trace changes: scroll it into view (two frames, so the
  // new content height is known).
  if (ctx.snap.trace_serial != followed_serial_ || query != followed_query_) {
    followed_serial_ = ctx.snap.trace_serial;
    followed_query_ = query;
    follow_frames_ = 2;
  }
  const float view_h = ImGui::GetWindowHeight() - header_h - ImGui::GetStyle().ScrollbarSize;
  if (follow_frames_ > 0) {
    --follow_frames_;
    const float top = query * row_h, sy = ImGui::GetScrollY();
    if (top < sy || top + row_h > sy + view_h) ImGui::SetScrollY(std::max(0.f, top + 2.f * row_h - view_h));
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const float total_w = label_w + L * cell_w;
  ImGui::Dummy(ImVec2(total_w, header_h));
  const ImU32 tc = ImGui::GetColorU32(ImGuiCol_Text), dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  std::vector<int> wanted;
  rows_shown_ = 0;
  int first_row = T, last_row = -1;
  ImGuiListClipper clip;
  clip.Begin(T, row_h);
  while (clip.Step()) {
    for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
      first_row = std::min(first_row, i), last_row = std::max(last_row, i);
      const float y = o.y + header_h + i * row_h;
      const std::string tok = std::to_string(i) + " " + chip_label_in_window(ctx.snap.labels, tr, i, ctx.model);
      const ImVec4 clip(o.x, y, o.x + label_w - 4, y + row_h);
      dl->AddText(nullptr, 0.f, ImVec2(o.x + 4, y + (row_h - fs) * 0.5f), i == query ? tc : dim, tok.c_str(), nullptr, 0.f, &clip);
      const std::shared_ptr<const LensRow> row = job_.row(i);
      if (!row) wanted.push_back(i);
      else ++rows_shown_;
      for (int l = 0; l < L; ++l) {
        const ImVec2 a(o.x + label_w + l * cell_w, y), b = a + ImVec2(cell_w - 1, row_h - 1);
        if (!row || static_cast<int>(row->cells.size()) != L) {
          dl->AddRectFilled(a, b, IM_COL32(60, 60, 60, 120));
          continue;
        }
        const LensCell& c = row->cells[static_cast<size_t>(l)];
        const float t = cell_shade(c, show_rank_, V);
        dl->AddRectFilled(a, b, t < 0.f ? IM_COL32(90, 90, 90, 255) : to_u32(colormap_rgb(Colormap::Viridis, t)));
        if (cell_w >= fs * 1.8f) {
          const ImU32 ink = t > 0.55f ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255);
          const std::string s = show_rank_ ? (c.next_rank < 0 ? "\xE2\x80\x93" : std::to_string(c.next_rank))
                                           : chip_label(token_text(ctx.model, c.top_ids.empty() ? 0 : c.top_ids[0]));
          text_centered(dl, a, b, ink, s);
        }
      }
      if (i == query)
        dl->AddRect(ImVec2(o.x, y), ImVec2(o.x + total_w, y + row_h - 1), IM_COL32(255, 220, 0, 255), 0.f, 0, 2.f);
      ImGui::Dummy(ImVec2(total_w, row_h));
    }
  }
  // The layer numbers on top, over the rows scrolled under them.
  const float hy = ImGui::GetWindowPos().y;
  dl->AddRectFilled(ImVec2(o.x, hy), ImVec2(o.x + total_w, hy + header_h), ImGui::GetColorU32(ImGuiCol_WindowBg));
  for (int l = 0; l < L; ++l)
    text_centered(dl, ImVec2(o.x + label_w + l * cell_w, hy), ImVec2(o.x + label_w + (l + 1) * cell_w, hy + header_h),
                  l == ctx.state.layer ? tc : dim, (cell_w >= fs * 2.4f ? "L" : "") + std::to_string(l));
  if (last_row >= first_row)
    grid_rect_ = ImVec4(o.x + label_w, o.y + header_h + first_row * row_h, L * cell_w, (last_row - first_row + 1) * row_h);
  // Hover: the cell under the mouse; click: that position becomes the query.
  if (ImGui::IsWindowHovered()) {
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const int i = static_cast<int>(std::floor((mp.y - o.y - header_h) / row_h));
    const int l = static_cast<int>(std::floor((mp.x - o.x - label_w) / cell_w));
    if (mp.y > hy + header_h && i >= 0 && i < T) {
      if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) ctx.state.query = i;
      const std::shared_ptr<const LensRow> row = job_.row(i);
      if (l >= 0 && l < L && row && static_cast<int>(row->cells.size()) == L)
        cell_tooltip(ctx, i, l, row->cells[static_cast<size_t>(l)]);
    }
  }
  ImGui::EndChild();
  ImGui::PopStyleVar();
  // The query's row first: it is the one being read.
  if (auto q = std::find(wanted.begin(), wanted.end(), query); q != wanted.end()) std::rotate(wanted.begin(), q, q + 1);
  if (!wanted.empty()) job_.request(ctx.snap.model, ctx.snap.trace, wanted);
}

void LensPanel::cell_tooltip(const FrameContext& ctx, int i, int l, const LensCell& c) const {
  const Trace& tr = ctx.trace;
  ImGui::BeginTooltip();
  ImGui::Text("position %d '%s', after layer %d%s", i, chip_label_in_window(ctx.snap.labels, tr, i, ctx.model).c_str(), l,
              l + 1 == static_cast<int>(tr.layers.size()) ? " (the model's own prediction)" : "");
  for (size_t k = 0; k < c.top_ids.size(); ++k)
    ImGui::Text("%2zu. %-16s %6.2f%%", k + 1, chip_label(token_text(ctx.model, c.top_ids[k])).c_str(), 100.0 * c.top_probs[k]);
  if (c.next_rank >= 0)
    ImGui::Text("next token '%s': %.2f%%, rank %d", chip_label(token_text(ctx.model, tr.tokens[static_cast<size_t>(i + 1)])).c_str(),
                100.0 * c.next_prob, c.next_rank);
  else
    ImGui::TextDisabled("the last token: nothing comes next yet");
  ImGui::TextDisabled("click: this position becomes the query");
  ImGui::EndTooltip();
}

}  // namespace attnviz::ui
