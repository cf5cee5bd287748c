#include "ui/panels/circuits_panel.h"

#include <algorithm>
#include <cmath>

#include "core/engine/head_scores.h"
#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

namespace {

const char* const kKinds[] = {"K-composition", "Q-composition", "V-composition", "largest of the three"};

float edge_value(const Composition& c, int kind, int l1, int h1, int l2, int h2) {
  const float k = c.at(c.k, l1, h1, l2, h2), q = c.at(c.q, l1, h1, l2, h2), v = c.at(c.v, l1, h1, l2, h2);
  return kind == 0 ? k : kind == 1 ? q : kind == 2 ? v : std::max({k, q, v});
}

// The colour of a head's label ("" grey).
ImU32 label_color(const std::string& label) {
  if (label == "previous-token") return IM_COL32(255, 170, 60, 255);
  if (label == "induction") return IM_COL32(90, 200, 255, 255);
  if (label == "first-token") return IM_COL32(170, 170, 170, 255);
  if (label == "self") return IM_COL32(200, 120, 255, 255);
  return IM_COL32(110, 110, 110, 255);
}

// Distance from p to the segment [a, b].
float segment_distance(ImVec2 p, ImVec2 a, ImVec2 b) {
  const ImVec2 ab = b - a, ap = p - a;
  const float len2 = ab.x * ab.x + ab.y * ab.y;
  const float t = len2 > 0 ? std::clamp((ap.x * ab.x + ap.y * ab.y) / len2, 0.f, 1.f) : 0.f;
  const ImVec2 d = p - (a + ab * t);
  return std::sqrt(d.x * d.x + d.y * d.y);
}

}  // namespace

void CircuitsPanel::draw_content(FrameContext& ctx) {
  graph_rect_ = ImVec4(0, 0, 0, 0);
  edges_shown_ = 0;
  if (!ctx.model) {
    ImGui::TextDisabled("no model");
    return;
  }
  job_.request(ctx.snap.model);
  const CompositionJob::Status st = job_.status();
  if (!st.error.empty()) {
    ImGui::TextWrapped("%s", st.error.c_str());
    return;
  }
  if (!st.result) {
    ImGui::TextDisabled("computing the composition of every pair of heads\xE2\x80\xA6");
    return;
  }
  const Composition& c = *st.result;
  const ModelConfig& cfg = ctx.model->config;
  const int L = c.L, H = c.H;
  if (thresholded_for_ != &c) {  // a new model: a threshold that shows its strongest edges
    std::vector<float> all;
    for (int l1 = 0; l1 < L; ++l1)
      for (int h1 = 0; h1 < H; ++h1)
        for (int l2 = l1 + 1; l2 < L; ++l2)
          for (int h2 = 0; h2 < H; ++h2) all.push_back(edge_value(c, kind_, l1, h1, l2, h2));
    std::sort(all.rbegin(), all.rend());
    threshold_ = all.empty() ? 0.f : all[std::min<size_t>(23, all.size() - 1)];
    thresholded_for_ = &c;
  }
  const float fs = ImGui::GetFontSize();
  ImGui::SetNextItemWidth(fs * 11.f);
  ImGui::Combo("##kind", &kind_, kKinds, IM_ARRAYSIZE(kKinds));
  ImGui::SameLine();
  ImGui::SetNextItemWidth(fs * 10.f);
  ImGui::SliderFloat("threshold", &threshold_, 0.f, 1.f, "%.3f");
  ImGui::SameLine();
  help_marker("Composition (Elhage et al. 2021) from the weights alone: how much what an earlier head writes can be "
              "read by a later head's key (K), query (Q) or value (V) side: \xE2\x80\x96W_QK\xC2\xB7W_OV\xE2\x80\x96 / "
              "(\xE2\x80\x96W_QK\xE2\x80\x96\xE2\x80\x96W_OV\xE2\x80\x96), the input norms' weights folded in, RoPE "
              "left out. An induction head reads a previous-token head through K-composition. Node colours: what "
              "the heads do on the current text (orange previous-token, blue induction, grey first-token, violet "
              "self). Click a node to select the head.");
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float margin = fs * 2.2f;
  const float col_w = L > 1 ? (avail.x - 2 * margin) / (L - 1) : 0.f;
  const float row_h = std::max(fs * 0.9f, (avail.y - fs * 2.5f) / std::max(1, H));
  const ImVec2 o = ImGui::GetCursorScreenPos() + ImVec2(margin, fs * 1.2f);
  const auto node = [&](int l, int h) { return o + ImVec2(L > 1 ? l * col_w : avail.x * 0.5f - margin, h * row_h + row_h * 0.5f); };
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  for (int l = 0; l < L; ++l) text_centered(dl, node(l, 0) - ImVec2(fs * 2, fs * 1.6f), node(l, 0) + ImVec2(fs * 2, -fs * 0.4f), dim, "L" + std::to_string(l));
  const ImVec2 mp = ImGui::GetIO().MousePos;
  const bool hovered_window = ImGui::IsWindowHovered();
  float best_d = fs * 0.4f;
  int best[4] = {-1, -1, -1, -1};
  for (int h = 0; h < H; ++h)  // head labels left of the first column
    text_centered(dl, node(0, h) - ImVec2(margin, fs * 0.5f), node(0, h) - ImVec2(fs * 0.6f, -fs * 0.5f), dim, "h" + std::to_string(h));
  float vmax = threshold_;
  for (int l1 = 0; l1 < L; ++l1)
    for (int h1 = 0; h1 < H; ++h1)
      for (int l2 = l1 + 1; l2 < L; ++l2)
        for (int h2 = 0; h2 < H; ++h2) vmax = std::max(vmax, edge_value(c, kind_, l1, h1, l2, h2));
  for (int l1 = 0; l1 < L; ++l1)
    for (int h1 = 0; h1 < H; ++h1)
      for (int l2 = l1 + 1; l2 < L; ++l2)
        for (int h2 = 0; h2 < H; ++h2) {
          const float v = edge_value(c, kind_, l1, h1, l2, h2);
          if (v < threshold_ || v <= 0.f) continue;
          ++edges_shown_;
          // The strongest edge shown is bright and thick, the threshold's faint and thin.
          const float a = std::clamp((v - threshold_) / std::max(1e-6f, vmax - threshold_), 0.f, 1.f);
          dl->AddLine(node(l1, h1), node(l2, h2), IM_COL32(235, 235, 235, static_cast<int>(50 + a * 205)), 1.f + 3.f * a);
          if (hovered_window) {
            const float d = segment_distance(mp, node(l1, h1), node(l2, h2));
            if (d < best_d) best_d = d, best[0] = l1, best[1] = h1, best[2] = l2, best[3] = h2;
          }
        }
  const std::vector<HeadScore>* scores = ctx.has_trace() ? &ctx.head_scores() : nullptr;
  const float r = std::clamp(row_h * 0.32f, 3.f, fs * 0.5f);
  for (int l = 0; l < L; ++l) {
    if (cfg.layer(l).mixer != Mixer::Softmax) continue;
    for (int h = 0; h < H; ++h) {
      const HeadScore* s = scores ? find_score(*scores, l, h) : nullptr;
      const ImVec2 p = node(l, h);
      dl->AddCircleFilled(p, r, label_color(s ? head_label(*s) : ""));
      if (l == ctx.state.layer && h == ctx.state.head) dl->AddCircle(p, r + 2.f, IM_COL32(255, 255, 255, 255), 0, 2.f);
      if (hovered_window && std::hypot(mp.x - p.x, mp.y - p.y) <= r + 2.f) {
        ImGui::SetTooltip("L%dH%d%s%s\nclick to select the head", l, h, s && !head_label(*s).empty() ? ": " : "",
                          s ? head_label(*s).c_str() : "");
        best[0] = -1;
        if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
          ctx.state.layer = l, ctx.state.head = h;
          ctx.state.kv_group = cfg.kv_head_of(h);
        }
      }
    }
  }
  if (best[0] >= 0) {
    const int l1 = best[0], h1 = best[1], l2 = best[2], h2 = best[3];
    dl->AddLine(node(l1, h1), node(l2, h2), IM_COL32(255, 220, 0, 255), 3.f);
    ImGui::SetTooltip("L%dH%d \xE2\x86\x92 L%dH%d\nK-composition %.3f\nQ-composition %.3f\nV-composition %.3f", l1, h1, l2,
                      h2, c.at(c.k, l1, h1, l2, h2), c.at(c.q, l1, h1, l2, h2), c.at(c.v, l1, h1, l2, h2));
  }
  graph_rect_ = ImVec4(o.x - margin, o.y - fs * 1.2f, avail.x, H * row_h + fs * 1.2f);
  ImGui::Dummy(ImVec2(avail.x, H * row_h + fs * 1.4f));
  ImGui::TextDisabled("%d edges at or above %.3f", edges_shown_, threshold_);
}

}  // namespace attnviz::ui
