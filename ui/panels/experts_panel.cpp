#include "ui/panels/experts_panel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/export/colormap.h"
#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

void ExpertsPanel::draw_content(FrameContext& ctx) {
  AppState& s = ctx.state;
  grid_rect_ = ImVec4(0, 0, 0, 0);
  const ModelConfig& c = ctx.model->config;
  if (!c.experts.count) {
    ImGui::TextDisabled("this model has no experts: each layer has one MLP (GPT-OSS routes each token to 4 of 32)");
    return;
  }
  const LayerTrace& lt = ctx.trace.layers[static_cast<size_t>(s.layer)];
  if (lt.router.shape.size() != 2) {
    ImGui::TextDisabled("layer %d recorded no routing", s.layer);
    return;
  }
  const int T = static_cast<int>(lt.router.dim(0)), E = static_cast<int>(lt.router.dim(1));
  const int K = static_cast<int>(lt.experts.dim(1));
  // (T, E): the weight each token gave each expert, 0 where it did not choose it.
  std::vector<float> w(static_cast<size_t>(T) * E, 0.f);
  std::vector<double> load(static_cast<size_t>(E), 0.0), mean_w(static_cast<size_t>(E), 0.0);
  for (int i = 0; i < T; ++i)
    for (int k = 0; k < K; ++k) {
      const int e = static_cast<int>(lt.experts.data[static_cast<size_t>(i * K + k)]);
      const float wt = lt.expert_weights.data[static_cast<size_t>(i * K + k)];
      if (e < 0 || e >= E) continue;
      w[static_cast<size_t>(i) * E + e] = wt;
      load[static_cast<size_t>(e)] += 1.0 / T;
      mean_w[static_cast<size_t>(e)] += wt;
    }
  ImGui::TextWrapped("layer %d: each token goes to %d of %d experts (the router's %d largest logits, a softmax over "
                     "those%s). Rows are tokens, columns experts; bars: the share of tokens that chose each expert.",
                     s.layer, K, E, K,
                     c.experts.gemma ? ", times each expert's learned scale; beside the dense MLP, whose output is added" : "");
  const float fs = ImGui::GetFontSize();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float label_w = fs * 5.f, bars_h = fs * 3.f;
  const float cell_w = std::max(2.f, std::min(fs * 1.4f, (avail.x - label_w - fs) / static_cast<float>(E)));
  const float cell_h = std::max(2.f, std::min(fs * 1.1f, (avail.y - bars_h - fs * 3.f) / static_cast<float>(std::max(T, 1))));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  // The load of each expert: a bar per column, the busiest at full height.
  const double top_load = std::max(1e-9, *std::max_element(load.begin(), load.end()));
  for (int e = 0; e < E; ++e) {
    const float x0 = o.x + label_w + static_cast<float>(e) * cell_w, h = static_cast<float>(load[static_cast<size_t>(e)] / top_load) * bars_h;
    dl->AddRectFilled(ImVec2(x0 + 1.f, o.y + bars_h - h), ImVec2(x0 + cell_w - 1.f, o.y + bars_h),
                      ImGui::GetColorU32(ImGuiCol_PlotHistogram));
  }
  const ImVec2 g0(o.x + label_w, o.y + bars_h + fs * 0.3f);
  grid_rect_ = ImVec4(g0.x, g0.y, cell_w * static_cast<float>(E), cell_h * static_cast<float>(T));
  dl->AddRectFilled(g0, ImVec2(g0.x + grid_rect_.z, g0.y + grid_rect_.w), IM_COL32(20, 20, 28, 255));
  for (int i = 0; i < T; ++i)
    for (int e = 0; e < E; ++e) {
      const float v = w[static_cast<size_t>(i) * E + e];
      if (v <= 0.f) continue;
      const Rgb8 col = colormap_rgb(s.probs_colormap, v);
      const ImVec2 a(g0.x + static_cast<float>(e) * cell_w, g0.y + static_cast<float>(i) * cell_h);
      dl->AddRectFilled(a, ImVec2(a.x + cell_w - (cell_w > 4 ? 1.f : 0.f), a.y + cell_h - (cell_h > 4 ? 1.f : 0.f)),
                        IM_COL32(col.r, col.g, col.b, 255));
    }
  // Token labels down the left where the rows are tall enough.
  if (cell_h >= fs * 0.7f)
    for (int i = 0; i < T; ++i) {
      const std::string lab = chip_label_in_window(ctx.snap.labels, ctx.trace, i, ctx.model);
      dl->PushClipRect(ImVec2(o.x, g0.y + i * cell_h), ImVec2(g0.x - fs * 0.2f, g0.y + (i + 1) * cell_h), true);
      dl->AddText(ImVec2(o.x, g0.y + static_cast<float>(i) * cell_h + (cell_h - fs) * 0.5f),
                  ImGui::GetColorU32(i == s.hovered_token ? ImGuiCol_PlotLinesHovered : ImGuiCol_Text), lab.c_str());
      dl->PopClipRect();
    }
  // Expert numbers under the grid, as many as fit.
  const int step = std::max(1, static_cast<int>(std::ceil(fs * 1.6f / cell_w)));
  for (int e = 0; e < E; e += step) {
    char num[8];
    std::snprintf(num, sizeof num, "%d", e);
    dl->AddText(ImVec2(g0.x + static_cast<float>(e) * cell_w, g0.y + grid_rect_.w + fs * 0.15f),
                ImGui::GetColorU32(ImGuiCol_TextDisabled), num);
  }
  ImGui::Dummy(ImVec2(label_w + grid_rect_.z, bars_h + fs * 1.5f + grid_rect_.w));
  // Hover: a column's load, a row's experts.
  const ImVec2 m = ImGui::GetIO().MousePos;
  if (!ImGui::IsWindowHovered()) return;
  const int e = static_cast<int>(std::floor((m.x - g0.x) / cell_w));
  if (e < 0 || e >= E) return;
  if (m.y >= o.y && m.y < g0.y) {
    ImGui::SetTooltip("expert %d: chosen by %.0f%% of the %d tokens, mean weight %.3f when chosen", e,
                      100.0 * load[static_cast<size_t>(e)], T,
                      load[static_cast<size_t>(e)] > 0 ? mean_w[static_cast<size_t>(e)] / (load[static_cast<size_t>(e)] * T) : 0.0);
    return;
  }
  const int i = static_cast<int>(std::floor((m.y - g0.y) / cell_h));
  if (i < 0 || i >= T) return;
  s.hover(i);
  std::string tip = "token " + std::to_string(i) + " '" + chip_label_in_window(ctx.snap.labels, ctx.trace, i, ctx.model) +
                    "' goes to:";
  char buf[96];
  for (int k = 0; k < K; ++k) {
    const int ex = static_cast<int>(lt.experts.data[static_cast<size_t>(i * K + k)]);
    std::snprintf(buf, sizeof buf, "\n  expert %d  weight %.3f  (router logit %.2f)", ex,
                  lt.expert_weights.data[static_cast<size_t>(i * K + k)], lt.router.data[static_cast<size_t>(i * E + ex)]);
    tip += buf;
  }
  ImGui::SetTooltip("%s", tip.c_str());
}

}  // namespace attnviz::ui
