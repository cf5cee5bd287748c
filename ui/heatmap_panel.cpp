#include "ui/heatmap_panel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/engine/rollout.h"
#include "ui/fonts.h"
#include "ui/imgui_util.h"

namespace attnviz::ui {

namespace {
const char* stage_explanation(Stage s) {
  switch (s) {
    case Stage::Scores: return "q_i \xC2\xB7 k_j for every pair: how well token j's key answers token i's query (before scaling; the future is not hidden yet)";
    case Stage::Scaled: return "scores / \xE2\x88\x9A" "d: keeps the numbers small so softmax does not saturate";
    case Stage::Capped: return "soft-capped: c \xC2\xB7 tanh(s / c) keeps every scaled score between \xE2\x88\x92" "c and c, before the mask (Gemma 2)";
    case Stage::Masked: return "causal mask: a token may not look at later tokens (j > i) \xE2\x86\x92 \xE2\x88\x92\xE2\x88\x9E (grey)";
    case Stage::Probs: return "softmax of each row: how much token i (row) attends to token j (column); every row sums to 1";
    case Stage::Q: return "queries (T \xC3\x97 d): what each token is looking for (after RoPE for llama)";
    case Stage::K: return "keys (T \xC3\x97 d) of this head's KV head: what each token offers to be found by";
    case Stage::V: return "values (T \xC3\x97 d) of this head's KV head: what each token passes on when attended to";
    case Stage::Out: return "head output = softmax \xC2\xB7 V (T \xC3\x97 d): the mix of values each token receives";
  }
  return "";
}

const ImU32 kBandColor = window_color();  // the frame of the window band

const char* kRolloutExplanation =
    "attention rollout up to this layer (an APPROXIMATION, Abnar & Zuidema 2020): each layer's weights averaged over "
    "its heads, plus the identity for the residual path, rows renormalised, multiplied through the layers. It "
    "ignores the values, the output projections and the MLPs, so read it as a rough picture of how much each token "
    "(column) flows into each position (row), not as an attribution.";
}  // namespace

void HeatmapPanel::draw_controls(FrameContext& ctx) {
  const ModelConfig& c = ctx.model->config;
  AppState& s = ctx.state;
  if (s.presentation) {  // number fields with − / + buttons: a slider's large grab would hide the number
    ImGui::PushItemWidth(ImGui::GetFontSize() * 5.f);
    if (ImGui::InputInt("layer", &s.layer)) s.layer = std::clamp(s.layer, 0, c.n_layer - 1);
    ImGui::SameLine();
    if (ImGui::InputInt("head", &s.head)) {
      s.head = std::clamp(s.head, 0, c.n_head - 1);
      s.kv_group = c.kv_head_of(s.head);
    }
    ImGui::PopItemWidth();
    return;  // the caption says the rest; leaving presentation (F2) brings the colormap and zoom
  }
  ImGui::PushItemWidth(ImGui::GetFontSize() * 7.f);
  ImGui::SliderInt("layer", &s.layer, 0, c.n_layer - 1);
  ImGui::SameLine();
  if (ImGui::SliderInt("head", &s.head, 0, c.n_head - 1)) s.kv_group = c.kv_head_of(s.head);
  ImGui::PopItemWidth();
  ImGui::SameLine();
  ImGui::TextDisabled("reads KV head %d of %d", c.kv_head_of(s.head), c.n_kv_head);
  if (s.ablation.has(s.layer, s.head)) {  // its pattern is drawn, but its output is replaced
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(0.95f, 0.35f, 0.35f, 1.f), "ablated (%s)", ablation_mode_name(s.ablation.mode));
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("this head's weights are as computed, but its output is replaced before the output projection");
  }
  // The colormap, "fit" and help on this line when they fit, else on the next (never cut).
  const float line_end = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  if (line_end - ImGui::GetItemRectMax().x > ImGui::GetFontSize() * 14.f) ImGui::SameLine();
  ImGui::PushItemWidth(ImGui::GetFontSize() * 6.f);
  int cm = s.probs_colormap == Colormap::Magma ? 1 : 0;
  const char* cms[] = {"viridis", "magma"};
  if (ImGui::Combo("colormap", &cm, cms, 2)) s.probs_colormap = cm == 1 ? Colormap::Magma : Colormap::Viridis;
  ImGui::PopItemWidth();
  ImGui::SameLine();
  if (ImGui::SmallButton("fit")) s.cell_px = 0.f;
  help_marker("Ctrl + mouse wheel over the matrix zooms, the scrollbars move; 'fit' shows the whole matrix.\n"
              "Keys: Alt+\xE2\x86\x91/\xE2\x86\x93 layer, Alt+\xE2\x86\x90/\xE2\x86\x92 head, Alt+PgUp/PgDn stage "
              "(without Alt when the text box is not focused; 1\xE2\x80\xA6" "9 pick a stage).");
}

void HeatmapPanel::draw_tabs(FrameContext& ctx) {
  AppState& s = ctx.state;
  const bool pending = !tabs_synced_ || s.stage != shown_tab_;  // a shortcut (or the start) set the stage
  Stage selected = shown_tab_;
  // Presenting: whole tab names, scrolled when they do not fit (never "softm…").
  if (ImGui::BeginTabBar("stages", ctx.state.presentation ? ImGuiTabBarFlags_FittingPolicyScroll : 0)) {
    const LayerTrace* lt = s.layer < static_cast<int>(ctx.trace.layers.size()) ? &ctx.trace.layers[s.layer] : nullptr;
    fit_stage(s, lt && lt->has(Stage::Capped));
    for (Stage st : stage_tab_order()) {
      if (lt && !lt->has(st)) continue;  // capped: only where the layer soft-caps
      const ImGuiTabItemFlags f = pending && st == s.stage ? ImGuiTabItemFlags_SetSelected : 0;
      if (ImGui::BeginTabItem(stage_label(st), nullptr, f)) {
        selected = st;
        ImGui::EndTabItem();
      }
    }
    rollout_ = false;
    if (ImGui::BeginTabItem("rollout ~")) {
      rollout_ = true;
      ImGui::EndTabItem();
    }
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", kRolloutExplanation);
    ImGui::EndTabBar();
  }
  if (!pending) s.stage = selected;  // a click on a tab
  else if (selected == s.stage) tabs_synced_ = true;
  shown_tab_ = selected;
}

void HeatmapPanel::draw_content(FrameContext& ctx) {
  if (ctx.state.presentation) {  // what is shown, large enough to read from the back of a room
    char caption[160];
    std::snprintf(caption, sizeof caption, "layer %d \xC2\xB7 head %d \xC2\xB7 %s%s", ctx.state.layer, ctx.state.head,
                  rollout_ ? "rollout" : stage_label(ctx.state.stage),
                  ctx.state.ablation.has(ctx.state.layer, ctx.state.head) ? " (ablated)" : "");
    if (ctx.fonts.big) ImGui::PushFont(ctx.fonts.big);
    ImGui::TextUnformatted(caption);
    if (ctx.fonts.big) ImGui::PopFont();
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("%s", rollout_ ? kRolloutExplanation : stage_explanation(ctx.state.stage));
    ImGui::SameLine(0, ImGui::GetFontSize());  // the layer and head sliders beside it; the rest when not presenting
  }
  draw_controls(ctx);
  draw_tabs(ctx);
  if (!ctx.state.presentation) {  // presenting: the caption's tooltip, the room goes to the matrix
    ImGui::PushTextWrapPos(0.f);
    ImGui::TextDisabled("%s", rollout_ ? kRolloutExplanation : stage_explanation(ctx.state.stage));
    ImGui::PopTextWrapPos();
  }
  draw_window_line(ctx);
  ExportOptions what;  // this layer, head and stage, as on screen
  what.stage = ctx.state.stage;
  what.layer = ctx.state.layer;
  what.head = stage_is_kv(ctx.state.stage) ? ctx.model->config.kv_head_of(ctx.state.head) : ctx.state.head;
  if (!stage_is_signed(ctx.state.stage)) what.colormap = ctx.state.probs_colormap;
  if (!ctx.state.presentation && !rollout_) export_.draw(ctx, what);  // presenting: the room goes to the matrix

  const ImVec2 avail = ImGui::GetContentRegionAvail();
  // The colorbar's column; a local layer's legend ("outside W=512") needs a little more.
  const bool local = ctx.state.layer < static_cast<int>(ctx.trace.layers.size()) && ctx.trace.layers[ctx.state.layer].window > 0;
  const float bar_w = ImGui::GetFontSize() * (local ? 8.5f : 5.5f);
  image_rect_ = ImVec4(0, 0, 0, 0);
  draw_matrix(ctx, std::max(50.f, avail.x - bar_w), avail.y);
  ImGui::SameLine();
  draw_colorbar(ctx, avail.y);
}

void HeatmapPanel::upload_if_changed(FrameContext& ctx) {
  const AppState& s = ctx.state;
  const LayerTrace& lt = ctx.trace.layers[s.layer];
  const Stage stage = s.stage;
  if (rollout_) {
    const Key key{ctx.snap.trace_serial, s.layer, -1, Stage::Probs, s.probs_colormap, true};
    if (key == key_ && tex_.valid()) return;
    const int T = ctx.trace.T();
    values_ = attention_rollout(ctx.trace, s.layer);  // (T, T)
    range_ = ValueRange{0.f, 1.f, true};
    colorize_rgba(s.probs_colormap, values_.data(), T, T, range_, rgba_, /*causal_mask=*/true);
    tex_.upload(T, T, rgba_);
    key_ = key;
    cmap_ = s.probs_colormap;
    return;
  }
  const std::vector<int64_t> shape = lt.shape(stage);
  const int hi = stage_is_kv(stage) ? ctx.model->config.kv_head_of(s.head) : s.head;  // head index in the stage
  const int rows = static_cast<int>(shape[1]), cols = static_cast<int>(shape[2]);
  const Colormap cmap = stage_is_signed(stage) ? Colormap::Diverging : s.probs_colormap;
  const Key key{ctx.snap.trace_serial, s.layer, hi, stage, cmap};
  if (key == key_ && tex_.valid()) return;
  const float* data = lt.head_values(stage, hi, values_);  // scaled/masked: derived into values_
  const int64_t n = static_cast<int64_t>(rows) * cols;
  range_ = stage == Stage::Probs ? ValueRange{0.f, 1.f, true} : symmetric_range(data, n);
  colorize_rgba(cmap, data, rows, cols, range_, rgba_, /*causal_mask=*/stage == Stage::Probs);
  if (stage == Stage::Masked || stage == Stage::Probs) paint_outside_window(rgba_, rows, cols, lt.window);
  tex_.upload(cols, rows, rgba_);
  key_ = key;
  cmap_ = cmap;
}

void HeatmapPanel::draw_matrix(FrameContext& ctx, float width, float height) {
  const Trace& tr = ctx.trace;
  AppState& s = ctx.state;
  const std::vector<int64_t> shape = tr.layers[s.layer].shape(rollout_ ? Stage::Probs : s.stage);
  MatrixLayout m;
  m.rows = static_cast<int>(shape[1]), m.cols = static_cast<int>(shape[2]);
  m.square = rollout_ || stage_is_square(s.stage);
  upload_if_changed(ctx);

  // Labels: token text down the left (rows = tokens), token text or dimension on top.
  const float fs = ImGui::GetFontSize();
  m.row_labels.resize(m.rows);
  for (int i = 0; i < m.rows; ++i) {
    m.row_labels[i] = chip_label_in_window(ctx.snap.labels, tr, i, ctx.model);
    m.label_w = std::max(m.label_w, ImGui::CalcTextSize(m.row_labels[i].c_str()).x);
  }
  m.left = std::min(m.label_w, fs * 6.f) + fs * 0.6f;
  m.top = fs * 1.4f;

  fit_cell_ = std::min((width - m.left - fs) / static_cast<float>(m.cols), (height - m.top - fs) / static_cast<float>(m.rows));
  // Whole pixels per cell keep the cells even; presenting, the matrix fills its room instead.
  fit_cell_ = std::clamp(fit_cell_ >= 3.f && !s.presentation ? std::floor(fit_cell_) : fit_cell_, 0.5f, 64.f);
  m.cell = s.cell_px > 0.f ? s.cell_px : fit_cell_;
  m.img = ImVec2(m.cell * static_cast<float>(m.cols), m.cell * static_cast<float>(m.rows));

  ImGuiIO& io = ImGui::GetIO();
  ImGui::BeginChild("matrix", ImVec2(width, height), false,
                    ImGuiWindowFlags_HorizontalScrollbar | (io.KeyCtrl ? ImGuiWindowFlags_NoScrollWithMouse : 0));
  m.origin = ImGui::GetCursorScreenPos();
  m.p0 = m.origin + ImVec2(m.left, m.top);
  ImGui::SetCursorScreenPos(m.p0);
  ImGui::Image(tex_.id(), m.img);
  const bool hovered = ImGui::IsItemHovered();
  image_rect_ = ImVec4(m.p0.x, m.p0.y, m.img.x, m.img.y);
  // Content size for the scrollbars.
  ImGui::SetCursorScreenPos(m.origin);
  ImGui::Dummy(ImVec2(m.left + m.img.x + fs * 0.5f, m.top + m.img.y + fs * 0.5f));

  draw_axis_labels(ctx, m);
  draw_highlights(ctx, m, hovered);
  if (ImGui::IsWindowHovered() && io.KeyCtrl && io.MouseWheel != 0.f) {
    const float cur = s.cell_px > 0.f ? s.cell_px : fit_cell_;
    s.cell_px = std::clamp(cur * std::pow(1.2f, io.MouseWheel), 0.5f, 96.f);
  }
  ImGui::EndChild();
}

// Axis labels shrink with the cells (down to 60 % of the UI font), then thin out.
void HeatmapPanel::draw_axis_labels(const FrameContext& ctx, const MatrixLayout& m) const {
  const AppState& s = ctx.state;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize();
  const ImU32 text_col = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 dim_col = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const ImU32 hover_col = IM_COL32(255, 220, 0, 255);
  const ImVec2 clip0 = ImGui::GetWindowPos(), clip1 = clip0 + ImGui::GetWindowSize();
  ImFont* font = ImGui::GetFont();
  // Presenting, labels stay at least 80 % of the (large) font: fewer of them, all readable.
  const float lfs = std::clamp(m.cell * 0.95f, fs * (s.presentation ? 0.8f : 0.6f), fs);
  const float shrink = lfs / fs;
  const int row_step = std::max(1, static_cast<int>(std::ceil(lfs * 0.9f / m.cell)));
  for (int i = 0; i < m.rows; i += row_step) {
    const float y = m.p0.y + (static_cast<float>(i) + 0.5f) * m.cell - lfs * 0.5f;
    if (y < clip0.y - fs || y > clip1.y) continue;
    const std::string& lab = m.row_labels[i];
    const float w = ImGui::CalcTextSize(lab.c_str()).x * shrink;
    dl->PushClipRect(ImVec2(m.origin.x, y), ImVec2(m.p0.x - fs * 0.3f, y + lfs), true);
    dl->AddText(font, lfs, ImVec2(m.p0.x - fs * 0.3f - w, y), i == s.hovered_token ? hover_col : text_col, lab.c_str());
    dl->PopClipRect();
  }
  // Column labels: the key tokens of a (T, T) matrix, the dimension index of Q, K, V, out.
  const float col_w = m.square ? std::min(m.label_w, fs * 3.f) * shrink + lfs * 0.15f
                               : ImGui::CalcTextSize("000").x * shrink + lfs * 0.3f;
  const int col_step = std::max(1, static_cast<int>(std::ceil(col_w / m.cell)));
  for (int j = 0; j < m.cols; j += col_step) {
    const float x = m.p0.x + (static_cast<float>(j) + 0.5f) * m.cell;
    if (x < clip0.x - col_w || x > clip1.x + col_w) continue;
    const std::string lab = m.square ? m.row_labels[j] : std::to_string(j);
    const float w = ImGui::CalcTextSize(lab.c_str()).x * shrink;
    const ImU32 col = m.square ? (j == s.hovered_token ? hover_col : text_col) : dim_col;
    dl->AddText(font, lfs, ImVec2(std::floor(x - w * 0.5f), m.origin.y + m.top - lfs - fs * 0.2f), col, lab.c_str());
  }
}

// The hovered token's row (as a query) and column (as a key), in every heatmap; under the
// mouse, the cell's frame and its tooltip with the numbers.
void HeatmapPanel::draw_highlights(FrameContext& ctx, const MatrixLayout& m, bool hovered) {
  AppState& s = ctx.state;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const int ht = s.hovered_token;
  const ImU32 hl = IM_COL32(255, 220, 0, 255);
  const float th = std::max(1.5f, ctx.scale * 2.f);
  if (ht >= 0 && ht < m.rows) {
    const float y = m.p0.y + static_cast<float>(ht) * m.cell;
    dl->AddRect(ImVec2(m.p0.x - 1, y), ImVec2(m.p0.x + m.img.x + 1, y + m.cell), hl, 0.f, 0, th);
    if (m.square) {
      const float x = m.p0.x + static_cast<float>(ht) * m.cell;
      dl->AddRect(ImVec2(x, m.p0.y - 1), ImVec2(x + m.cell, m.p0.y + m.img.y + 1), hl, 0.f, 0, th);
    }
  }
  if (m.square && !rollout_) draw_window_band(ctx, m);
  if (s.lesson.active && s.lesson.row >= 0 && s.lesson.row < m.rows) {  // the guided lesson's row i and cell (i, j)
    const ImU32 lc = IM_COL32(80, 220, 255, 255);
    const float y = m.p0.y + static_cast<float>(s.lesson.row) * m.cell;
    dl->AddRect(ImVec2(m.p0.x - 2, y - 1), ImVec2(m.p0.x + m.img.x + 2, y + m.cell + 1), lc, 0.f, 0, th);
    if (m.square && s.lesson.col >= 0 && s.lesson.col < m.cols) {
      const ImVec2 c0 = m.p0 + ImVec2(static_cast<float>(s.lesson.col) * m.cell, y - m.p0.y);
      dl->AddRect(c0 - ImVec2(th, th), c0 + ImVec2(m.cell + th, m.cell + th), lc, 0.f, 0, th * 2.f);
    }
  }
  if (!hovered) return;
  const ImVec2 mouse = ImGui::GetIO().MousePos - m.p0;
  const int i = std::clamp(static_cast<int>(mouse.y / m.cell), 0, m.rows - 1);
  const int j = std::clamp(static_cast<int>(mouse.x / m.cell), 0, m.cols - 1);
  s.hover(i);
  const ImVec2 c0 = m.p0 + ImVec2(static_cast<float>(j) * m.cell, static_cast<float>(i) * m.cell);
  dl->AddRect(c0, c0 + ImVec2(m.cell, m.cell), IM_COL32(255, 255, 255, 255), 0.f, 0, th);
  cell_tooltip(ctx, i, j);
}

void HeatmapPanel::cell_tooltip(const FrameContext& ctx, int i, int j) const {
  const Trace& tr = ctx.trace;
  const ModelConfig& c = ctx.model->config;
  const AppState& s = ctx.state;
  const LayerTrace& lt = tr.layers[s.layer];
  const Stage stage = s.stage;
  auto tok = [&](int p) { return chip_label_in_window(ctx.snap.labels, tr, p, ctx.model); };
  ImGui::BeginTooltip();
  if (rollout_) {
    ImGui::Text("query i = %d '%s'  \xE2\x86\x90  token j = %d '%s'", i, tok(i).c_str(), j, tok(j).c_str());
    ImGui::Text("rollout through layers 0 \xE2\x80\xA6 %d = %.5f", s.layer, values_[static_cast<size_t>(i) * tr.T() + j]);
    ImGui::TextDisabled("an approximation: head-averaged weights + identity, multiplied through the layers");
  } else if (stage_is_square(stage)) {
    const int h = s.head;
    const float d = static_cast<float>(c.head_size);
    // Row i of the scores and weights (recomputed, one row's work, when the trace is compact).
    std::vector<float> srow_buf, prow_buf;
    const float* srow = lt.row_values(Stage::Scores, h, i, srow_buf);  // (T)
    const float* prow = lt.row_values(Stage::Probs, h, i, prow_buf);   // (T)
    const float prob = prow[j];
    const CellNumbers n = cell_numbers(lt, srow, i, j);
    ImGui::Text("query i = %d '%s'  \xE2\x86\x92  key j = %d '%s'   (layer %d, head %d)", i, tok(i).c_str(), j,
                tok(j).c_str(), s.layer, h);
    if (lt.window > 0)
      ImGui::TextColored(ImVec4(0.f, 0.9f, 0.67f, 1.f), "window %d: query %d sees keys [%d, %d]", lt.window, i, n.first, i);
    ImGui::Separator();
    ImGui::Text("q\xC2\xB7k            = %+.5f", n.score);
    if (std::abs(lt.scale * std::sqrt(d) - 1.f) < 1e-4f)
      ImGui::Text("/\xE2\x88\x9A" "d (d = %d)  = %+.5f   (\xE2\x88\x9A" "d = %.3f)", c.head_size, n.scaled, std::sqrt(d));
    else
      ImGui::Text("\xC3\x97 scale       = %+.5f   (scale = %.5g, the model's own)", n.scaled, lt.scale);
    if (lt.softcap > 0)
      ImGui::Text("soft-capped  = %+.5f   (%g \xC2\xB7 tanh(x / %g))", n.capped, lt.softcap, lt.softcap);
    if (n.future) {
      ImGui::TextColored(ImVec4(1.f, 0.6f, 0.3f, 1.f), "masked       = \xE2\x88\x92\xE2\x88\x9E   (j > i: the future is hidden)");
      ImGui::Text("exp          = 0");
    } else if (n.outside) {
      ImGui::TextColored(ImVec4(0.85f, 0.7f, 0.45f, 1.f),
                         "masked       = \xE2\x88\x92\xE2\x88\x9E   (j < i \xE2\x88\x92 W + 1 = %d: outside the window W = %d)",
                         n.first, lt.window);
      ImGui::Text("exp          = 0");
    } else {
      if (lt.window > 0)
        ImGui::Text("masked       = no (%d \xE2\x89\xA4 j \xE2\x89\xA4 i)", n.first);
      else
        ImGui::Text("masked       = no (j \xE2\x89\xA4 i)");
      ImGui::Text("exp(x \xE2\x88\x92 max) = %.5f   (row max %.4f, row \xCE\xA3 = %.5f)", n.exp, n.row_max, n.row_sum);
    }
    ImGui::Text("weight       = %.5f   (= exp / \xCE\xA3; row sums to 1)", prob);
  } else {
    const Tensor& t = *lt.stored(stage);  // q, k, v, out: always stored
    const int hi = stage_is_kv(stage) ? c.kv_head_of(s.head) : s.head;
    ImGui::Text("token %d '%s', dimension %d of %d", i, tok(i).c_str(), j, static_cast<int>(t.dim(2)));
    ImGui::Text("%s = %+.5f", stage_label(stage), t.at(hi, i, j));
    if (stage_is_kv(stage)) ImGui::TextDisabled("KV head %d, shared by query heads of group %d", hi, hi);
  }
  ImGui::EndTooltip();
}

void HeatmapPanel::draw_colorbar(FrameContext& ctx, float height) {
  // One 256-texel strip per colormap, made once.
  for (int k = 0; k < kColormapCount; ++k)
    if (!colorbars_[k].valid()) {
      std::vector<uint8_t> px(256 * 4);
      for (int y = 0; y < 256; ++y) {
        const Rgb8 c = colormap_rgb(static_cast<Colormap>(k), 1.f - static_cast<float>(y) / 255.f);
        px[static_cast<size_t>(y) * 4 + 0] = c.r;
        px[static_cast<size_t>(y) * 4 + 1] = c.g;
        px[static_cast<size_t>(y) * 4 + 2] = c.b;
        px[static_cast<size_t>(y) * 4 + 3] = 255;
      }
      colorbars_[k].upload(1, 256, px);
    }
  const float fs = ImGui::GetFontSize();
  ImGui::BeginGroup();
  const bool window_legend = !rollout_ && ctx.trace.layers[ctx.state.layer].window > 0;  // one more legend line
  const float h = std::max(fs * 4.f, std::min(height - fs * (window_legend ? 6.3f : 5.f), image_rect_.w > 0 ? image_rect_.w : height));
  ImGui::Text("%s", colormap_name(cmap_));
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::Image(colorbars_[static_cast<int>(cmap_)].id(), ImVec2(fs * 1.2f, h));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  char buf[32];
  const ImU32 tc = ImGui::GetColorU32(ImGuiCol_Text);
  std::snprintf(buf, sizeof buf, "%.3g", range_.hi);
  dl->AddText(ImVec2(p.x + fs * 1.5f, p.y), tc, buf);
  std::snprintf(buf, sizeof buf, "%.3g", 0.5f * (range_.lo + range_.hi));
  dl->AddText(ImVec2(p.x + fs * 1.5f, p.y + h * 0.5f - fs * 0.5f), tc, buf);
  std::snprintf(buf, sizeof buf, "%.3g", range_.lo);
  dl->AddText(ImVec2(p.x + fs * 1.5f, p.y + h - fs), tc, buf);
  if (rollout_ || ctx.state.stage == Stage::Masked || ctx.state.stage == Stage::Probs) {
    ImGui::Dummy(ImVec2(0, fs * 0.3f));
    const ImVec2 q = ImGui::GetCursorScreenPos();
    dl->AddRectFilled(q, q + ImVec2(fs * 1.2f, fs), to_u32(masked_rgb()));
    ImGui::Dummy(ImVec2(fs * 1.3f, fs));
    ImGui::SameLine();
    ImGui::TextUnformatted("masked");
    const LayerTrace& lt = ctx.trace.layers[ctx.state.layer];
    if (!rollout_ && lt.window > 0) {  // the cells a local layer's window hides
      const ImVec2 r = ImGui::GetCursorScreenPos();
      dl->AddRectFilled(r, r + ImVec2(fs * 1.2f, fs), to_u32(kOutsideWindowRgb));
      dl->AddRect(r, r + ImVec2(fs * 1.2f, fs), kBandColor, 0.f, 0, 1.5f);
      ImGui::Dummy(ImVec2(fs * 1.3f, fs));
      ImGui::SameLine();
      ImGui::Text("outside W=%d", lt.window);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("window %d: query i sees keys [i \xE2\x88\x92 %d, i]; older keys are masked (this colour), "
                          "the future is masked (grey)", lt.window, lt.window - 1);
    }
  }
  ImGui::EndGroup();
}

// The local layer's window under the tabs: what query i sees, against the block_size crop.
void HeatmapPanel::draw_window_line(const FrameContext& ctx) const {
  const ModelConfig& c = ctx.model->config;
  if (!c.any_local() || ctx.state.layer >= static_cast<int>(ctx.trace.layers.size())) return;
  const LayerTrace& lt = ctx.trace.layers[ctx.state.layer];
  ImGui::PushTextWrapPos(0.f);
  if (lt.window > 0 && ctx.state.presentation)  // one line: the room goes to the matrix
    ImGui::TextColored(ImVec4(0.f, 0.9f, 0.67f, 1.f), "layer %d local, window %d: query i sees keys [i \xE2\x88\x92 %d, i]",
                       ctx.state.layer, lt.window, lt.window - 1);
  else if (lt.window > 0)
    ImGui::TextColored(ImVec4(0.f, 0.9f, 0.67f, 1.f),
                       "layer %d is local, window W = %d: query i sees keys [i \xE2\x88\x92 %d, i] (the framed band); "
                       "older keys are masked. block_size %d is a different thing: a crop of the text, positions restart at 0.",
                       ctx.state.layer, lt.window, lt.window - 1, ctx.trace.block_size);
  else
    ImGui::TextDisabled("layer %d is global: query i sees keys [0, i]. Other layers of this model are local (%s).",
                        ctx.state.layer, c.features().c_str());
  ImGui::PopTextWrapPos();
}

// The band a local layer's query rows see, framed: its left edge at key i − W + 1 (a
// staircase, one step per row) and its right edge on the diagonal.
void HeatmapPanel::draw_window_band(const FrameContext& ctx, const MatrixLayout& m) const {
  const LayerTrace& lt = ctx.trace.layers[ctx.state.layer];
  if (lt.window <= 0 || m.rows == 0) return;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float th = std::max(1.5f, ctx.scale * 2.f);
  std::vector<ImVec2> left, right;
  left.reserve(static_cast<size_t>(m.rows) * 2 + 1);
  right.reserve(static_cast<size_t>(m.rows) * 2 + 1);
  for (int i = 0; i < m.rows; ++i) {
    const float y0 = m.p0.y + static_cast<float>(i) * m.cell, y1 = y0 + m.cell;
    const float xl = m.p0.x + static_cast<float>(window_first(i, lt.window)) * m.cell;
    const float xr = m.p0.x + static_cast<float>(std::min(i + 1, m.cols)) * m.cell;
    left.push_back(ImVec2(xl, y0));
    left.push_back(ImVec2(xl, y1));
    right.push_back(ImVec2(xr, y0));
    right.push_back(ImVec2(xr, y1));
  }
  dl->AddPolyline(left.data(), static_cast<int>(left.size()), kBandColor, 0, th);
  dl->AddPolyline(right.data(), static_cast<int>(right.size()), kBandColor, 0, th);
  dl->AddLine(ImVec2(m.p0.x, m.p0.y), ImVec2(m.p0.x + m.cell, m.p0.y), kBandColor, th);  // the first row's top
  const float yb = m.p0.y + static_cast<float>(m.rows) * m.cell;
  dl->AddLine(left.back(), ImVec2(right.back().x, yb), kBandColor, th);  // the last row's bottom
}

}  // namespace attnviz::ui
