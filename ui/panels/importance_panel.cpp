#include "ui/panels/importance_panel.h"

#include <algorithm>
#include <cmath>

#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

void ImportancePanel::draw_content(FrameContext& ctx) {
  // Only the plain tokens matter: the grid ablates one head at a time on the clean model.
  // 1 + 2·L·H forward passes of about 2·parameters·T flops each: automatic up to ~20 GFLOP
  // (fortunes-en on a full window: ~3), else on request, so typing never competes with it.
  const std::shared_ptr<const Model>& model = ctx.snap.model;
  const ModelConfig& c = model->config;
  if (c.any_linear()) {  // every cell is an ablated pass, and ablation stops at softmax layers for now
    ImGui::TextWrapped("Head importance switches one head off at a time (ablation), which does not cover %s's "
                       "linear-attention and convolution layers yet.",
                       c.model_type.c_str());
    grid_rect_ = ImVec4(0, 0, 0, 0);
    return;
  }
  const double gflop = (1.0 + 2.0 * c.n_layer * c.n_head) * 2.0 * static_cast<double>(model->parameter_count()) *
                       ctx.trace.T() / 1e9;
  const ImportanceJob::Status st = job_.status();
  const bool current = st.grid && st.grid_window == ctx.trace.tokens;
  if (current || st.running) asked_ = false;
  if (gflop <= 20.0 || asked_) {
    job_.request(model, ctx.trace.tokens);
  } else if (!current && !st.running) {
    char label[96];
    std::snprintf(label, sizeof label, "compute (%d passes, ~%.0f GFLOP)", 1 + 2 * c.n_layer * c.n_head, gflop);
    if (ImGui::Button(label)) asked_ = true;
  }

  ImGui::RadioButton("zero", &show_mean_, 0);
  ImGui::SameLine();
  ImGui::RadioButton("mean", &show_mean_, 1);
  help_marker("Each cell: the mean next-token loss over the text in the window (nats) with that head alone ablated, "
              "minus the loss with every head on. Red: the model needs this head here (the loss rises); blue: the "
              "text is predicted better without it. zero replaces the head's output by 0, mean by its mean over the "
              "window's positions (which keeps what the head always adds and removes only what depends on the "
              "token). One forward pass per head and mode, on a thread of its own.");
  if (st.running) {
    ImGui::SameLine();
    const float f = st.total ? static_cast<float>(st.done) / static_cast<float>(st.total) : 0.f;
    ImGui::ProgressBar(f, ImVec2(ImGui::GetFontSize() * 8.f, 0), (std::to_string(st.done) + " / " + std::to_string(st.total)).c_str());
  }
  if (!st.error.empty()) ImGui::TextColored(ImVec4(1.f, 0.4f, 0.4f, 1.f), "%s", st.error.c_str());
  grid_rect_ = ImVec4(0, 0, 0, 0);
  if (!st.grid || st.grid->heads.size() != static_cast<size_t>(ctx.model->config.n_layer * ctx.model->config.n_head)) {
    ImGui::TextDisabled(st.running ? "computing\xE2\x80\xA6" : "not computed yet for this text");
    return;
  }
  const bool stale = st.grid_window != ctx.trace.tokens;
  ImGui::TextDisabled("clean loss %.3f nats over %d predictions%s", st.grid->base_loss, st.grid->targets,
                      stale ? " (previous text)" : "");
  draw_grid(ctx, *st.grid, stale);
}

void ImportancePanel::draw_grid(FrameContext& ctx, const ImportanceGrid& g, bool stale) {
  const ModelConfig& c = ctx.model->config;
  AppState& s = ctx.state;
  const int L = c.n_layer, H = c.n_head;
  double range = 1e-6;  // symmetric colour range: the largest change either way
  for (const auto& h : g.heads) range = std::max(range, std::abs(show_mean_ ? h.mean : h.zero));
  const float fs = ImGui::GetFontSize();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float label = fs * 2.2f, head_row = fs * 1.2f;
  const float cell = std::clamp(std::floor(std::min((avail.x - label) / H, (avail.y - head_row - fs * 1.6f) / L)), fs * 1.2f, fs * 6.f);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const ImU32 tc = ImGui::GetColorU32(ImGuiCol_Text), dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  for (int h = 0; h < H; ++h)
    text_centered(dl, o + ImVec2(label + h * cell, 0), o + ImVec2(label + (h + 1) * cell, fs), h == s.head ? tc : dim,
                  "h" + std::to_string(h));
  for (int l = 0; l < L; ++l) {
    const float y = o.y + head_row + l * cell;
    text_centered(dl, ImVec2(o.x, y), ImVec2(o.x + label, y + cell), l == s.layer ? tc : dim, "L" + std::to_string(l));
    for (int h = 0; h < H; ++h) {
      const HeadImportance& hi = g.heads[static_cast<size_t>(l * H + h)];
      const double v = show_mean_ ? hi.mean : hi.zero;
      const ImVec2 a(o.x + label + h * cell, y), b = a + ImVec2(cell - 2, cell - 2);
      dl->AddRectFilled(a, b, to_u32(colormap_rgb(Colormap::Diverging, static_cast<float>(0.5 + 0.5 * v / range)), stale ? 140 : 255));
      if (cell >= fs * 2.2f) {
        char txt[16];
        std::snprintf(txt, sizeof txt, "%+.2f", v);
        text_centered(dl, a, b, IM_COL32(0, 0, 0, 255), txt);
      }
      if (l == s.layer && h == s.head) dl->AddRect(a - ImVec2(2, 2), b + ImVec2(2, 2), IM_COL32(255, 255, 255, 255), 0.f, 0, 2.f);
      if (s.ablation.has(l, h)) draw_ablated_mark(dl, a, b, std::max(1.5f, ctx.scale * 1.5f));
      ImGui::SetCursorScreenPos(a);
      ImGui::PushID(l * H + h);
      ImGui::InvisibleButton("cell", ImVec2(cell - 2, cell - 2));
      if (ImGui::IsItemClicked()) {
        s.layer = l, s.head = h;
        s.kv_group = c.kv_head_of(h);
      }
      if (ImGui::IsItemClicked(ImGuiMouseButton_Right)) s.ablation.toggle(l, h);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("layer %d, head %d ablated alone: loss %+.4f nats (zero), %+.4f nats (mean)\n"
                          "clean loss %.4f nats\nclick to select it, right-click to ablate it",
                          l, h, hi.zero, hi.mean, g.base_loss);
      ImGui::PopID();
    }
  }
  grid_rect_ = ImVec4(o.x + label, o.y + head_row, H * cell, L * cell);
  ImGui::SetCursorScreenPos(o + ImVec2(0, head_row + L * cell + fs * 0.2f));
  ImGui::TextDisabled("colour range \xC2\xB1%.3f nats (red: loss rises without the head)", range);
}

}  // namespace attnviz::ui
