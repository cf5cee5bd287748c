#include "ui/head_grid_panel.h"

#include <algorithm>

#include "ui/imgui_util.h"

namespace attnviz::ui {

void upload_probs(Texture& tex, const Trace& tr, int layer, int head, Colormap cmap, std::vector<uint8_t>& scratch) {
  const LayerTrace& lt = tr.layers[static_cast<size_t>(layer)];
  const int T = tr.T();
  std::vector<float> dense;
  colorize_rgba(cmap, lt.head_values(Stage::Probs, head, dense), T, T, ValueRange{0.f, 1.f, true}, scratch,
                /*causal_mask=*/true);
  tex.upload(T, T, scratch);
}

void HeadGridPanel::draw_content(FrameContext& ctx) {
  const Trace& tr = ctx.trace;
  const ModelConfig& c = ctx.model->config;
  AppState& s = ctx.state;
  const int L = c.n_layer, H = c.n_head, KV = c.n_kv_head, G = c.group_size();

  if (serial_ != ctx.snap.trace_serial || cmap_ != s.probs_colormap ||
      thumbs_.size() != static_cast<size_t>(L) * static_cast<size_t>(H)) {
    thumbs_.resize(static_cast<size_t>(L) * static_cast<size_t>(H));
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) upload_probs(thumbs_[static_cast<size_t>(l * H + h)], tr, l, h, s.probs_colormap, rgba_);
    scores_ = score_heads(tr);
    serial_ = ctx.snap.trace_serial;
    cmap_ = s.probs_colormap;
  }

  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  if (s.presentation)  // large fonts: one short line, and the room goes to the thumbnails
    ImGui::TextWrapped("same frame colour = same KV head");
  else
    ImGui::TextWrapped("%d layers \xC3\x97 %d heads \xC2\xB7 click one to select it \xC2\xB7 same frame colour = same KV head (%d groups of %d)",
                       L, H, KV, G);
  ImGui::PopStyleColor();
  ExportOptions what;  // every layer and head, as this grid shows them
  what.stage = Stage::Probs;
  what.colormap = s.probs_colormap;
  if (!s.presentation) export_.draw(ctx, what);
  const float fs = ImGui::GetFontSize();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float row_label = fs * 2.2f, head_row = fs * 1.2f, gap = std::max(3.f, fs * 0.3f);
  float side = std::min((avail.x - row_label) / static_cast<float>(H) - gap,
                        (avail.y - head_row - fs * 0.5f) / static_cast<float>(L) - gap);
  side = std::clamp(std::floor(side), fs * 1.5f, fs * 12.f);

  ImGui::BeginChild("grid", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const ImU32 tc = ImGui::GetColorU32(ImGuiCol_Text), dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  // Head numbers and group bars on top.
  for (int g = 0; g < KV; ++g) {
    const float x0 = o.x + row_label + static_cast<float>(g * G) * (side + gap);
    const float x1 = x0 + static_cast<float>(G) * (side + gap) - gap;
    dl->AddRectFilled(ImVec2(x0, o.y + fs * 1.05f), ImVec2(x1, o.y + fs * 1.2f), group_color(g, KV));
  }
  for (int h = 0; h < H; ++h) {
    const float x = o.x + row_label + static_cast<float>(h) * (side + gap);
    const std::string lab = "h" + std::to_string(h);
    text_centered(dl, ImVec2(x, o.y), ImVec2(x + side, o.y + fs), h == s.head ? tc : dim, lab);
  }
  const float th = std::max(2.f, ctx.scale * 2.f);
  for (int l = 0; l < L; ++l) {
    const float y = o.y + head_row + fs * 0.3f + static_cast<float>(l) * (side + gap);
    const std::string lab = "L" + std::to_string(l);
    text_centered(dl, ImVec2(o.x, y), ImVec2(o.x + row_label - gap, y + side), l == s.layer ? tc : dim, lab);
    for (int h = 0; h < H; ++h) {
      const ImVec2 a(o.x + row_label + static_cast<float>(h) * (side + gap), y), b = a + ImVec2(side, side);
      ImGui::SetCursorScreenPos(a);
      ImGui::PushID(l * H + h);
      ImGui::Image(thumbs_[static_cast<size_t>(l * H + h)].id(), ImVec2(side, side));
      const bool hov = ImGui::IsItemHovered();
      if (ImGui::IsItemClicked()) {
        s.layer = l;
        s.head = h;
        s.kv_group = c.kv_head_of(h);
      }
      ImGui::PopID();
      const int g = c.kv_head_of(h);
      dl->AddRect(a - ImVec2(1, 1), b + ImVec2(1, 1), group_color(g, KV), 0.f, 0, th);
      if (l == s.layer && h == s.head)
        dl->AddRect(a - ImVec2(th + 2, th + 2), b + ImVec2(th + 2, th + 2), IM_COL32(255, 255, 255, 255), 0.f, 0, th);
      const HeadScore& sc = scores_[static_cast<size_t>(l * H + h)];
      const std::string role = head_label(sc);
      if (!role.empty() && side >= fs * 2.f) {  // what the head does on this text, on the thumbnail
        const std::string tag = role == "previous-token" ? "prev" : role == "first-token" ? "sink" : role == "induction" ? "ind" : role;
        const ImVec2 ts = ImGui::CalcTextSize(tag.c_str());
        dl->AddRectFilled(ImVec2(a.x, b.y - ts.y), ImVec2(a.x + ts.x + 4, b.y), IM_COL32(0, 0, 0, 190));
        dl->AddText(ImVec2(a.x + 2, b.y - ts.y), IM_COL32(255, 255, 255, 255), tag.c_str());
      }
      if (hov) {
        dl->AddRect(a, b, IM_COL32(255, 220, 0, 255), 0.f, 0, th);
        ImGui::SetTooltip("layer %d, head %d (KV head %d)\non this text, mean weight on: previous token %.2f, first token %.2f, "
                          "itself %.2f, after an earlier occurrence (induction) %s\nclick to show it in the heatmap",
                          l, h, g, sc.previous_token, sc.first_token, sc.self,
                          sc.induction < 0 ? "n/a" : std::to_string(sc.induction).substr(0, 4).c_str());
      }
    }
  }
  ImGui::SetCursorScreenPos(o);
  const ImVec2 size(row_label + static_cast<float>(H) * (side + gap), head_row + fs * 0.3f + static_cast<float>(L) * (side + gap));
  ImGui::Dummy(size);
  grid_rect_ = ImVec4(o.x + row_label, o.y + head_row + fs * 0.3f, size.x - row_label, size.y - head_row - fs * 0.3f);
  ImGui::EndChild();
}

}  // namespace attnviz::ui
