#include "ui/panels/heatmap_panel.h"

#include <imgui_internal.h>  // SetItemUsingMouseWheel

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/engine/rollout.h"
#include "core/export/colormap.h"
#include "ui/draw/fonts.h"
#include "ui/draw/imgui_util.h"
#include "ui/state/window_paint.h"
#include "ui/state/text_view.h"

namespace attnviz::ui {

namespace {
// The tab's name (stage_title), its ImGui ID the stage's label whatever the layer.
std::string tab_label(Stage st, const ModelConfig& c, int l) { return stage_title(st, c, l) + "###" + stage_label(st); }

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
    case Stage::Implicit:
      return "a linear-attention head's mixing matrix A: head output o_t = \xCE\xA3_s A[t,s]\xC2\xB7v_s, exactly. "
             "Red is positive, blue negative: the delta rule overwrites what memory held, so rows need not sum to 1";
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
      s.head = std::clamp(s.head, 0, std::max(0, c.heads_at(s.layer) - 1));
      if (s.head < c.n_head) s.kv_group = c.kv_head_of(s.layer, s.head);
    }
    ImGui::PopItemWidth();
    return;  // the caption says the rest; leaving presentation (F2) brings the colormap and zoom
  }
  ImGui::PushItemWidth(ImGui::GetFontSize() * 5.f);
  ImGui::SliderInt("layer", &s.layer, 0, c.n_layer - 1);
  ImGui::SameLine();
  const Mixer mixer = c.layer(s.layer).mixer;
  if (c.heads_at(s.layer) > 0 && ImGui::SliderInt("head", &s.head, 0, c.heads_at(s.layer) - 1) && s.head < c.n_head)
    s.kv_group = c.kv_head_of(s.layer, s.head);
  ImGui::PopItemWidth();
  ImGui::SameLine();
  if (mixer == Mixer::GatedDeltaNet)
    ImGui::TextDisabled("linear attention: value head %d reads key head %d of %d", s.head, c.linear.key_head(s.head),
                        c.linear.k_heads);
  else if (mixer == Mixer::ShortConv)
    ImGui::TextDisabled("short convolution: no heads");
  else if (const int src = c.layer(s.layer).kv_source; src >= 0)  // Gemma 4's KV sharing: no K, V of its own
    ImGui::TextDisabled("reads KV head %d of %d: the K and V of layer %d (shared)", c.kv_head_of(s.layer, s.head),
                        c.kv_heads_at(s.layer), src);
  else
    ImGui::TextDisabled("reads KV head %d of %d", c.kv_head_of(s.layer, s.head), c.kv_heads_at(s.layer));
  if (mixer == Mixer::Softmax && c.per_layer_attention()) {  // Gemma 4: each layer's head size, and V = K
    ImGui::SameLine();
    ImGui::TextDisabled("\xC2\xB7 d = %d%s", c.head_size_at(s.layer), c.layer(s.layer).v_from_k ? " \xC2\xB7 V = K" : "");
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("this layer's head size%s", c.layer(s.layer).v_from_k
                                                       ? "; V is the raw key projection (attention_k_eq_v): no v_proj"
                                                       : "");
  }
  if (s.ablation.has(s.layer, s.head)) {  // its pattern is drawn, but its output is replaced
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(0.95f, 0.35f, 0.35f, 1.f), "ablated (%s)", ablation_mode_name(s.ablation.mode));
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("this head's weights are as computed, but its output is replaced before the output projection");
  }
  // The colormap, "fit", "go to", export and help on this line when they fit, else on the
  // next (never cut).
  const float line_end = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  if (line_end - ImGui::GetItemRectMax().x > ImGui::GetFontSize() * 27.f) ImGui::SameLine();
  ImGui::PushItemWidth(ImGui::GetFontSize() * 6.f);
  int cm = s.probs_colormap == Colormap::Magma ? 1 : 0;
  const char* cms[] = {"viridis", "magma"};
  if (ImGui::Combo("colormap", &cm, cms, 2)) s.probs_colormap = cm == 1 ? Colormap::Magma : Colormap::Viridis;
  ImGui::PopItemWidth();
  ImGui::SameLine();
  if (ImGui::SmallButton("fit")) s.cell_px = 0.f;
  ImGui::SameLine();
  draw_go_to(ctx);
  // Export behind a button: its path field would take a line from the matrix.
  if (!rollout_) {
    ImGui::SameLine();
    if (ImGui::SmallButton("export\xE2\x80\xA6")) ImGui::OpenPopup("export");
    if (ImGui::BeginPopup("export")) {
      ExportOptions what;  // this layer, head and stage, as on screen
      what.stage = s.stage;
      what.layer = s.layer;
      what.head = stage_is_kv(s.stage) && mixer == Mixer::Softmax ? c.kv_head_of(s.layer, s.head) : s.head;
      if (!stage_is_signed(s.stage)) what.colormap = s.probs_colormap;
      export_.draw(ctx, what);
      ImGui::EndPopup();
    }
  }
  ImGui::SameLine();
  help_marker(
      "Mouse wheel over the matrix zooms about the pointer (from the whole matrix to 64 px per cell); "
      "drag pans; a click selects a cell (its row becomes the query); Home or 'fit' shows the whole "
      "matrix; 'go to' centres a token's row and column. Zoomed in, the minimap in the corner shows "
      "where you are: click or drag in it to move. The strip under the matrix shows the hovered (or "
      "selected) row's weights as bars, its strongest keys named. Where cells are smaller than a "
      "pixel, each pixel shows the largest value of its cells (signed stages: the largest magnitude).\n"
      "Keys: Alt+\xE2\x86\x91/\xE2\x86\x93 layer, Alt+\xE2\x86\x90/\xE2\x86\x92 head, Alt+PgUp/PgDn stage "
      "(without Alt when the text box is not focused; 1\xE2\x80\xA6"
      "9 pick a stage).");
  if (!goto_error_.empty()) ImGui::TextColored(ImVec4(1.f, 0.45f, 0.4f, 1.f), "%s", goto_error_.c_str());
}

HeatmapPanel::NavState HeatmapPanel::nav_state() const {
  NavState n;
  n.zoom = view_.zoom, n.fit = view_.fit, n.x0 = view_.x0, n.y0 = view_.y0;
  n.tex_w = tex_w_, n.tex_h = tex_h_, n.tex_cells = tex_cells_;
  n.rebuilds = rebuilds_;
  n.rows_computed = rows_computed_;
  n.rows_pooled = rows_pooled_;
  n.minimap = view_.zoomed() && image_rect_.z > 0.f;
  n.strip_row = strip_row_;
  n.goto_error = goto_error_;
  return n;
}

void HeatmapPanel::draw_tabs(FrameContext& ctx) {
  AppState& s = ctx.state;
  const bool pending = !tabs_synced_ || s.stage != shown_tab_;  // a shortcut (or the start) set the stage
  Stage selected = shown_tab_;
  // Presenting: whole tab names, scrolled when they do not fit (never "softm…").
  if (ImGui::BeginTabBar("stages", ctx.state.presentation ? ImGuiTabBarFlags_FittingPolicyScroll : 0)) {
    const LayerTrace* lt = s.layer < static_cast<int>(ctx.trace.layers.size()) ? &ctx.trace.layers[s.layer] : nullptr;
    fit_stage(s, lt && lt->has(Stage::Capped), lt ? lt->mixer : Mixer::Softmax);
    for (Stage st : stage_tab_order()) {
      if (lt ? !lt->has(st) : st == Stage::Implicit) continue;  // capped: only where the layer soft-caps
      const ImGuiTabItemFlags f = pending && st == s.stage ? ImGuiTabItemFlags_SetSelected : 0;
      if (ImGui::BeginTabItem(tab_label(st, ctx.model->config, s.layer).c_str(), nullptr, f)) {
        selected = st;
        ImGui::EndTabItem();
      }
    }
    rollout_ = false;
    // Rollout multiplies every layer's softmax weights: a hybrid's other layers have none.
    if (!ctx.model->config.any_linear() && ImGui::BeginTabItem("rollout ~")) {
      rollout_ = true;
      ImGui::EndTabItem();
    }
    if (!ctx.model->config.any_linear() && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", kRolloutExplanation);
    ImGui::EndTabBar();
  }
  if (!pending) s.stage = selected;  // a click on a tab
  else if (selected == s.stage) tabs_synced_ = true;
  shown_tab_ = selected;
}

void HeatmapPanel::draw_big_caption(FrameContext& ctx) {
  const std::string caption = shown_title(ctx.model->config, ctx.state.layer, ctx.state.head, ctx.state.stage, rollout_) +
                              (ctx.state.ablation.has(ctx.state.layer, ctx.state.head) ? " (ablated)" : "");
  if (ctx.fonts.big) ImGui::PushFont(ctx.fonts.big);
  ImGui::PushTextWrapPos(0.f);
  ImGui::TextUnformatted(caption.c_str());
  ImGui::PopTextWrapPos();
  if (ctx.fonts.big) ImGui::PopFont();
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("%s", rollout_ ? kRolloutExplanation : stage_explanation(ctx.state.stage));
}

void HeatmapPanel::draw_explanation(FrameContext& ctx, bool one_line) {
  const ModelConfig& mc = ctx.model->config;
  std::string text;
  const bool sink = !rollout_ && ctx.state.stage == Stage::Probs && !ctx.trace.layers[ctx.state.layer].sink.shape.empty();
  if (sink) {  // GPT-OSS: the rows do not sum to 1
    text = "softmax of each row over the tokens and this head's learned sink (the \"sink\" column, then dropped): how "
           "much token i (row) attends to token j (column); a row sums to 1 \xE2\x88\x92 its sink";
  } else if (!rollout_ && ctx.state.stage == Stage::Scaled && !scale_is_inv_sqrt_d(mc, ctx.state.layer)) {
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "scores \xC3\x97 %.5g, this model's own scale (1/\xE2\x88\x9A" "d would be %.5g): Gemma's "
                  "query_pre_attn_scalar^\xE2\x88\x92\xC2\xBD, Granite's attention_multiplier, or 1 where "
                  "QK-norm sets the scores' size (Gemma 4)",
                  static_cast<double>(mc.layer(ctx.state.layer).scale),
                  1.0 / std::sqrt(static_cast<double>(mc.head_size_at(ctx.state.layer))));
    text = buf;
  } else {
    text = rollout_ ? kRolloutExplanation : stage_explanation(ctx.state.stage);
  }
  const float w = ImGui::GetContentRegionAvail().x;
  if (!one_line || ImGui::CalcTextSize(text.c_str()).x <= w) {
    ImGui::PushTextWrapPos(0.f);
    ImGui::TextDisabled("%s", text.c_str());
    ImGui::PopTextWrapPos();
    return;
  }
  // One line, ended with an ellipsis; the whole sentence on hover.
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const float h = ImGui::GetTextLineHeight();
  ImGui::Dummy(ImVec2(w, h));
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::RenderTextEllipsis(ImGui::GetWindowDrawList(), p0, ImVec2(p0.x + w, p0.y + h), p0.x + w, p0.x + w,
                            text.c_str(), nullptr, nullptr);
  ImGui::PopStyleColor();
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 30.f);
    ImGui::TextUnformatted(text.c_str());
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

// A short convolution layer (LFM2) has no weights per head: what it does instead, and which
// layers attend. True when it drew that (nothing else to draw for the layer).
namespace {
bool draw_conv_note(const FrameContext& ctx) {
  const ModelConfig& mc = ctx.model->config;
  if (mc.layer(ctx.state.layer).mixer != Mixer::ShortConv) return false;
  std::string full;  // the layers that do attend
  for (int l = 0; l < mc.n_layer; ++l)
    if (mc.layer(l).mixer == Mixer::Softmax) full += (full.empty() ? "" : ", ") + std::to_string(l);
  ImGui::PushTextWrapPos(0.f);
  ImGui::TextDisabled(
      "layer %d is a gated short convolution (LFM2): in_proj splits each token into B, C and x; every channel of "
      "B \xE2\x8A\x99 x is mixed with the same channel of the last %d tokens through %d fixed weights, then multiplied "
      "by C. No token looks anything up: there are no attention weights, no heads and no KV cache, only the last "
      "%d inputs kept. Select a full-attention layer (%s) to see attention.",
      ctx.state.layer, mc.short_conv_kernel - 1, mc.short_conv_kernel, mc.short_conv_kernel - 1, full.c_str());
  ImGui::PopTextWrapPos();
  return true;
}
}  // namespace

void HeatmapPanel::draw_caption(FrameContext& ctx) {
  if (!ctx.has_trace()) {
    ImGui::TextDisabled("computing\xE2\x80\xA6");
    return;
  }
  draw_big_caption(ctx);
  draw_controls(ctx);
  if (ctx.model->config.layer(ctx.state.layer).mixer != Mixer::ShortConv) draw_tabs(ctx);
  draw_explanation(ctx, /*one_line=*/false);
  draw_window_line(ctx);
}

void HeatmapPanel::draw_content(FrameContext& ctx) {
  const ModelConfig& mc = ctx.model->config;
  if (caption_elsewhere_) {  // the Caption panel says what is shown: all the room to the matrix
    if (draw_conv_note(ctx)) {
      image_rect_ = ImVec4(0, 0, 0, 0);
      return;
    }
  } else {
    if (ctx.state.presentation) {  // what is shown, large enough to read from the back of a room
      draw_big_caption(ctx);
      ImGui::SameLine(0, ImGui::GetFontSize());  // the layer and head fields beside it; the rest when not presenting
    }
    draw_controls(ctx);
    if (draw_conv_note(ctx)) {
      image_rect_ = ImVec4(0, 0, 0, 0);
      return;
    }
    draw_tabs(ctx);
    if (!ctx.state.presentation) draw_explanation(ctx, /*one_line=*/true);  // presenting: the caption's tooltip
    draw_window_line(ctx);
  }

  const ImVec2 avail = ImGui::GetContentRegionAvail();
  // The colorbar's column; a local layer's legend ("outside W=512") needs a little more.
  const bool local = ctx.state.layer < static_cast<int>(ctx.trace.layers.size()) && ctx.trace.layers[ctx.state.layer].window > 0;
  const float bar_w = ImGui::GetFontSize() * (local ? 8.5f : 5.5f);
  image_rect_ = ImVec4(0, 0, 0, 0);
  draw_matrix(ctx, std::max(50.f, avail.x - bar_w), avail.y);
  ImGui::SameLine();
  draw_colorbar(ctx, avail.y);
}

namespace {
// How a stage's cells become texels: weights (probs, rollout) keep the largest value of a
// block, signed stages the value of largest magnitude; the cells drawn as masked (the
// future, a local layer's hidden keys) are left out of the blocks of probs, masked and
// rollout, so a block is grey or brown only when all of it is.
PoolMode pool_mode(bool rollout, Stage st) {
  return rollout || !stage_is_signed(st) ? PoolMode::Max : PoolMode::Extreme;
}
PoolMask pool_mask(bool rollout, Stage st, int window) {
  if (rollout) return PoolMask{true, 0};
  if (st == Stage::Probs || st == Stage::Masked) return PoolMask{true, window};
  return PoolMask{};
}
constexpr int kMaxTexels = 8192;                         // per side: within every GL's texture size limit
constexpr double kInteractionS = 0.15;                   // a wheel or drag this recent: build coarse, refine after
constexpr float kGoToCellPx = 16.f;                      // "go to" zooms in to at least this (labels readable)
const ImU32 kSelectColor = IM_COL32(255, 90, 200, 255);  // apart from the lesson's cyan and the hover's yellow
const ImU32 kTopKeyColor = IM_COL32(255, 150, 30, 255);  // the text view's strongest-key colour
}  // namespace

const float* HeatmapPanel::matrix_data(FrameContext& ctx, int rows, int cols) {
  const AppState& s = ctx.state;
  const LayerTrace& lt = ctx.trace.layers[s.layer];
  Key key;
  if (rollout_) {
    key = Key{ctx.snap.trace_serial, s.layer, -1, Stage::Probs, s.probs_colormap, true};
  } else {
    const Stage st = s.stage;
    // head index in the stage (a linear layer's k and v are stored per value head)
    const int hi = stage_is_kv(st) && lt.mixer == Mixer::Softmax ? ctx.model->config.kv_head_of(s.layer, s.head) : s.head;
    key = Key{ctx.snap.trace_serial, s.layer, hi, st, stage_is_signed(st) ? Colormap::Diverging : s.probs_colormap};
  }
  Key same_data = key;
  same_data.cmap = key_.cmap;  // a new colormap recolours, the data stays
  if (data_ && key_trace_ == &ctx.trace && same_data == key_) {
    if (key.cmap != key_.cmap) tex_stale_ = mini_stale_ = true, changed_from_ = -1;
    key_ = key;
    cmap_ = key.cmap;
    return data_;
  }
  if (key.rollout) {
    data_ld_ = cols;
    values_ = attention_rollout(ctx.trace, s.layer);  // (T, T)
    data_ = values_.data();
    range_ = ValueRange{0.f, 1.f, true};
  } else {
    // The last result of this head, from the run just before, computed into values_: only
    // the rows the new run recomputed are computed again (a keystroke: one row, not T).
    const bool follows = data_ && data_ == values_.data() && !key_.rollout && key_.layer == key.layer &&
                         key_.head == key.head && key_.stage == key.stage &&
                         (key.stage == Stage::Probs || key.stage == Stage::Implicit) &&
                         key_.trace_serial + 1 == key.trace_serial;
    if (follows) {  // data_ld_: the pitch values_ has, then the one it gets
      int64_t computed = 0;
      data_ = lt.update_head_values(key.stage, key.head, values_T_, ctx.snap.recomputed_from, values_, &data_ld_,
                                    &computed);
      rows_computed_ += computed;
    } else {
      data_ = lt.head_values(key.stage, key.head, values_);  // derived or compact: computed into values_
      data_ld_ = cols;
      if (data_ == values_.data()) rows_computed_ += rows;
    }
    values_T_ = rows;
    range_ = key.stage == Stage::Probs ? ValueRange{0.f, 1.f, true}
                                       : symmetric_range(data_, static_cast<int64_t>(rows) * cols);
  }
  // The rows that changed since the texture was built: from the run's first recomputed row
  // when this result follows the texture's on the same head and stage (a keystroke), else all.
  const bool next = !key.rollout && !key_.rollout && key_trace_ && key_.layer == key.layer && key_.head == key.head &&
                    key_.stage == key.stage && key_.cmap == key.cmap && key_.trace_serial + 1 == key.trace_serial;
  if (!next)
    changed_from_ = -1;
  else if (!tex_stale_)
    changed_from_ = ctx.snap.recomputed_from;
  else if (changed_from_ >= 0)
    changed_from_ = std::min(changed_from_, ctx.snap.recomputed_from);
  key_ = key;
  key_trace_ = &ctx.trace;
  cmap_ = key.cmap;
  tex_stale_ = mini_stale_ = true;
  return data_;
}

// Pools the cells `src` of (rows, cols) `data` into an (h, w) texture, coloured, with a local
// layer's hidden keys in their brown. h, w: the grid asked for, then the one built.
void HeatmapPanel::build_texture(Texture& tex, const float* data, int rows, int cols, const CellRect& src, int* h,
                                 int* w) {
  const PoolMask mask = pool_mask(key_.rollout, key_.stage, pool_window_);
  pool_cells(data, rows, cols, src, *h, *w, pool_mode(key_.rollout, key_.stage), mask, pooled_, h, w, data_ld_);
  if (pooled_.empty()) return;
  colorize_rgba(cmap_, pooled_.data(), *h, *w, range_, rgba_);
  if (mask.window > 0)
    for (int y = 0; y < *h; ++y)
      for (int x = 0; x < *w; ++x) {
        const size_t k = static_cast<size_t>(y) * *w + x;
        if (pooled_[k] != -std::numeric_limits<float>::infinity() ||
            !block_outside_window(texel_block(src, *h, *w, y, x), mask.window))
          continue;
        rgba_[k * 4 + 0] = kOutsideWindowRgb.r, rgba_[k * 4 + 1] = kOutsideWindowRgb.g,
                      rgba_[k * 4 + 2] = kOutsideWindowRgb.b;
      }
  tex.upload(*w, *h, rgba_);
  ++rebuilds_;
}

// Colours texel rows [y0, y1) of grid_ into grid_rgba_ (tex_cap_w_ texels a row), with a
// local layer's hidden keys in their brown.
void HeatmapPanel::colour_grid_rows(int y0, int y1) {
  const int window = grid_.mask.window;
  for (int y = y0; y < y1; ++y) {
    const float* v = grid_.values.data() + static_cast<size_t>(y) * grid_.w;  // (w)
    uint8_t* out = grid_rgba_.data() + static_cast<size_t>(y) * tex_cap_w_ * 4;
    colorize_rows(cmap_, v, y, 1, grid_.w, range_, out, /*causal_mask=*/false);
    if (window <= 0) continue;
    for (int x = 0; x < grid_.w; ++x)
      if (v[x] == -std::numeric_limits<float>::infinity() && block_outside_window(grid_.block(y, x), window))
        out[x * 4 + 0] = kOutsideWindowRgb.r, out[x * 4 + 1] = kOutsideWindowRgb.g, out[x * 4 + 2] = kOutsideWindowRgb.b;
  }
  tex_range_ = range_;
}

// The texture covers the cells in view and a quarter of the view more on each side (small
// pans and zooms reuse it), at the resolution on screen, on a grid of fixed block edges
// (pool_grid: s cells per texel, texels of 1 to 1.05 pixels). New data that follows the
// texture's (a keystroke: the rows from the first one the run recomputed) re-pools, colours
// and uploads only the texel rows it touches, into a texture with room to grow; the rest
// is rebuilt: other data, a view the texture does not cover, texels that became smaller
// than a pixel (a texel would be skipped), or, once the wheel and the drag have rested for
// kInteractionS, texels larger than 1.25 pixels that are not yet cells (while they move: a
// coarser grid).
void HeatmapPanel::update_texture(const float* data, int rows, int cols, bool interacting) {
  refine_pending_ = false;
  const CellRect vis = visible_cells(view_);
  if (vis.empty() || !data) return;
  const PoolMode mode = pool_mode(key_.rollout, key_.stage);
  const PoolMask mask = pool_mask(key_.rollout, key_.stage, pool_window_);
  if (tex_stale_ && changed_from_ >= 0 && tex_.valid() && grid_.s > 0 && grid_.mode == mode &&
      grid_.mask.causal == mask.causal && grid_.mask.window == mask.window) {
    int y0 = 0, y1 = 0;
    bool resized = false;
    if (pool_grid_update(data, rows, cols, data_ld_, changed_from_, grid_, &y0, &y1, &resized) &&
        grid_.h <= tex_.height() && grid_.w <= tex_.width()) {
      if (range_.lo != tex_range_.lo || range_.hi != tex_range_.hi) y0 = 0;  // the colours' scale moved
      colour_grid_rows(y0, y1);
      if (y1 > y0) tex_.update_rows(y0, y1 - y0, grid_rgba_);
      tex_stale_ = false;
      rows_pooled_ += y1 - y0;
    }
  }
  if (grid_.s > 0) tex_cells_ = grid_.cells(), tex_h_ = grid_.h, tex_w_ = grid_.w;
  const float px = view_.zoom * static_cast<float>(grid_.s);  // pixels per texel
  const bool must = tex_stale_ || !tex_.valid() || grid_.s <= 0 || !tex_cells_.contains(vis) || px < 0.999f;
  const bool coarse = grid_.s > 1.0 && px > 1.25f;
  if (!must && !coarse) return;
  if (!must && interacting) {
    refine_pending_ = true;
    return;
  }
  const int pr = std::max(1, vis.rows() / 4), pc = std::max(1, vis.cols() / 4);
  const CellRect src{std::max(0, vis.r0 - pr), std::min(rows, vis.r1 + pr), std::max(0, vis.c0 - pc),
                     std::min(cols, vis.c1 + pc)};
  double s = grid_scale(interacting ? view_.zoom / 1.44f : view_.zoom);
  while (static_cast<double>(std::max(src.rows(), src.cols())) / s + 2.0 > kMaxTexels) s *= kGridStep;
  pool_grid(data, rows, cols, data_ld_, src, s, mode, mask, grid_);
  if (grid_.s <= 0) return;
  // Room for a quarter more texels (typing grows the matrix), within the texture size limit.
  tex_cap_h_ = std::min(kMaxTexels, grid_.h + grid_.h / 4 + 8);
  tex_cap_w_ = std::min(kMaxTexels, grid_.w + grid_.w / 4 + 8);
  // What lies past the held texels: the masked colour (a causal grid's new columns in its
  // old rows are masked: pool_grid_update leaves them to it).
  uint8_t masked[4];
  const float neg_inf = -std::numeric_limits<float>::infinity();
  colorize_rows(cmap_, &neg_inf, 0, 1, 1, range_, masked, false);
  grid_rgba_.resize(static_cast<size_t>(tex_cap_h_) * tex_cap_w_ * 4);
  for (size_t k = 0; k < grid_rgba_.size(); k += 4) std::copy_n(masked, 4, grid_rgba_.data() + k);
  colour_grid_rows(0, grid_.h);
  tex_.upload(tex_cap_w_, tex_cap_h_, grid_rgba_);
  ++rebuilds_;
  rows_pooled_ += grid_.h;
  tex_cells_ = grid_.cells(), tex_h_ = grid_.h, tex_w_ = grid_.w;
  tex_stale_ = false;
  refine_pending_ = interacting && grid_.s > 1.0 && view_.zoom * grid_.s > 1.25;
}

ImVec4 HeatmapPanel::minimap_rect(ImVec2 vp0, ImVec2 vp) const {
  if (!view_.zoomed() || view_.rows <= 0 || view_.cols <= 0) return ImVec4(0, 0, 0, 0);
  const float side = std::clamp(std::min(vp.x, vp.y) * 0.28f, 48.f, 220.f);
  const float aspect = static_cast<float>(view_.cols) / static_cast<float>(view_.rows);
  const float w = std::max(12.f, aspect >= 1.f ? side : side * aspect),
              h = std::max(12.f, aspect >= 1.f ? side / aspect : side);
  const float margin = std::max(6.f, ImGui::GetFontSize() * 0.5f);
  return ImVec4(vp0.x + vp.x - w - margin, vp0.y + vp.y - h - margin, w, h);
}

// Zoomed in: the whole matrix small in the bottom-right corner, the view framed on it.
void HeatmapPanel::draw_minimap(const float* data, ImVec2 vp0, ImVec2 vp) {
  const ImVec4 r = minimap_rect(vp0, vp);
  if (r.z <= 0.f || !data) return;
  int h = std::min(view_.rows, static_cast<int>(r.w)), w = std::min(view_.cols, static_cast<int>(r.z));
  if (mini_stale_ || !mini_.valid() || h != mini_h_ || w != mini_w_) {
    mini_h_ = h, mini_w_ = w;
    build_texture(mini_, data, view_.rows, view_.cols, CellRect{0, view_.rows, 0, view_.cols}, &h, &w);
    mini_stale_ = false;
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 a(r.x, r.y), b(r.x + r.z, r.y + r.w);
  dl->AddRectFilled(a - ImVec2(3, 3), b + ImVec2(3, 3), IM_COL32(20, 20, 24, 230));
  dl->AddImage(mini_.id(), a, b);
  // The view: [x0, x0 + vw / zoom) × [y0, y0 + vh / zoom) cells, clipped to the matrix.
  const float sx = r.z / static_cast<float>(view_.cols), sy = r.w / static_cast<float>(view_.rows);
  const ImVec2 v0(a.x + std::max(0.f, view_.x0) * sx, a.y + std::max(0.f, view_.y0) * sy);
  const ImVec2 v1(std::min(b.x, a.x + (view_.x0 + view_.vw / view_.zoom) * sx),
                  std::min(b.y, a.y + (view_.y0 + view_.vh / view_.zoom) * sy));
  dl->AddRectFilled(v0, ImVec2(std::max(v1.x, v0.x + 2.f), std::max(v1.y, v0.y + 2.f)), IM_COL32(255, 255, 255, 50));
  dl->AddRect(v0 - ImVec2(1, 1), ImVec2(std::max(v1.x, v0.x + 2.f), std::max(v1.y, v0.y + 2.f)) + ImVec2(1, 1),
              IM_COL32(255, 220, 0, 255), 0.f, 0, 2.f);
  dl->AddRect(a - ImVec2(3, 3), b + ImVec2(3, 3), ImGui::GetColorU32(ImGuiCol_Border));
}

void HeatmapPanel::handle_input(FrameContext& ctx, const MatrixLayout& m, ImVec2 vp0, ImVec2 vp) {
  ImGuiIO& io = ImGui::GetIO();
  const double now = ImGui::GetTime();
  ImGui::SetCursorScreenPos(vp0);
  ImGui::InvisibleButton("##cells", ImVec2(std::max(vp.x, 1.f), std::max(vp.y, 1.f)));
  ImGui::SetItemUsingMouseWheel();  // the wheel zooms; the window does not scroll
  const bool hovered = ImGui::IsItemHovered();
  const ImVec4 mr = minimap_rect(vp0, vp);
  auto in_minimap = [&](ImVec2 p) {
    return mr.z > 0.f && p.x >= mr.x && p.y >= mr.y && p.x < mr.x + mr.z && p.y < mr.y + mr.w;
  };
  if (hovered && io.MouseWheel != 0.f) {
    const ImVec2 p = io.MousePos - vp0;
    zoom_at(view_, view_.zoom * std::pow(1.2f, io.MouseWheel), p.x, p.y);
    last_input_ = now;
  }
  if (ImGui::IsItemActivated()) {
    drag_ = in_minimap(io.MousePos) ? Drag::Minimap : Drag::Pan;
    moved_ = false;
  }
  if (ImGui::IsItemActive()) {
    if (drag_ == Drag::Minimap && mr.z > 0.f) {  // the view's centre follows the pointer on the minimap
      center_on(view_, std::clamp((io.MousePos.x - mr.x) / mr.z, 0.f, 1.f) * static_cast<float>(m.cols),
                std::clamp((io.MousePos.y - mr.y) / mr.w, 0.f, 1.f) * static_cast<float>(m.rows));
      last_input_ = now;
    } else if (drag_ == Drag::Pan) {
      if (!moved_ && ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {  // past the click threshold: a drag
        moved_ = true;
        const ImVec2 d = ImGui::GetMouseDragDelta(ImGuiMouseButton_Left);
        pan_by(view_, d.x, d.y);
      } else if (moved_) {
        pan_by(view_, io.MouseDelta.x, io.MouseDelta.y);
      }
      if (moved_) {
        ImGui::SetMouseCursor(ImGuiMouseCursor_ResizeAll);
        last_input_ = now;
      }
    }
  }
  if (ImGui::IsItemDeactivated()) {
    if (drag_ == Drag::Pan && !moved_) {  // a click: select the cell (its row becomes the query)
      const ImVec2 p = io.MouseClickedPos[0] - vp0;
      int i = -1, j = -1;
      if (cell_at(view_, p.x, p.y, &i, &j)) {
        sel_i_ = i, sel_j_ = j;
        ctx.state.query = i;
        // A score or weight cell of a softmax layer: "Why this score" explains it.
        if (!rollout_ && stage_is_square(ctx.state.stage) && ctx.state.stage != Stage::Implicit && j <= i &&
            ctx.model->config.layer(ctx.state.layer).mixer == Mixer::Softmax) {
          ctx.state.key = j;
          ctx.state.why_requested = true;
        }
      }
    }
    drag_ = Drag::None;
    moved_ = false;
  }
  if (hovered && !io.WantTextInput && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Home))) fit_view(view_);
}

void HeatmapPanel::apply_go_to(FrameContext& ctx, int i, int rows, int cols) {
  std::string msg;
  if (!parse_token_index(std::to_string(i), rows, &i, &msg)) {
    goto_error_ = msg;
    return;
  }
  goto_error_.clear();
  if (!view_.zoomed()) zoom_at(view_, std::min(kGoToCellPx, view_.max_zoom()), 0.f, 0.f);  // a zoom chosen stays
  const bool square = rows == cols;
  center_on(view_, square ? static_cast<float>(i) + 0.5f : view_.cell_x(view_.vw * 0.5f), static_cast<float>(i) + 0.5f);
  sel_i_ = i, sel_j_ = square ? i : -1;
  ctx.state.query = i;
}

void HeatmapPanel::draw_go_to(FrameContext& ctx) {
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 4.5f);
  if (ImGui::InputTextWithHint("##goto", "go to", goto_buf_, sizeof goto_buf_, ImGuiInputTextFlags_EnterReturnsTrue)) {
    int i = -1;
    std::string msg;
    if (parse_token_index(goto_buf_, ctx.trace.T(), &i, &msg))
      pending_goto_ = i;
    else
      goto_error_ = msg;
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "go to token i: type its index (0 \xE2\x80\xA6 %d) and Enter; the view centres on its row and column",
        ctx.trace.T() - 1);
}

void HeatmapPanel::draw_matrix(FrameContext& ctx, float width, float height) {
  const Trace& tr = ctx.trace;
  AppState& s = ctx.state;
  const LayerTrace& lt = tr.layers[s.layer];
  const std::vector<int64_t> shape = lt.shape(rollout_ ? Stage::Probs : s.stage);
  MatrixLayout m;
  m.rows = static_cast<int>(shape[1]), m.cols = static_cast<int>(shape[2]);
  m.square = rollout_ || stage_is_square(s.stage);
  pool_window_ = rollout_ ? 0 : lt.window;
  const float* data = matrix_data(ctx, m.rows, m.cols);

  // Labels: token text down the left (rows = tokens), token text or dimension on top; made
  // once per trace.
  const float fs = ImGui::GetFontSize();
  if (labels_serial_ != ctx.snap.trace_serial || static_cast<int>(label_cache_.size()) != m.rows || label_font_ != fs) {
    label_cache_.resize(m.rows);
    label_w_ = 0.f;
    for (int i = 0; i < m.rows; ++i) {
      label_cache_[i] = chip_label_in_window(ctx.snap.labels, tr, i, ctx.model);
      label_w_ = std::max(label_w_, ImGui::CalcTextSize(label_cache_[i].c_str()).x);
    }
    labels_serial_ = ctx.snap.trace_serial;
    label_font_ = fs;
  }
  m.row_labels = &label_cache_;
  m.label_w = label_w_;
  m.left = std::min(m.label_w, fs * 6.f) + fs * 0.6f;
  if (!rollout_ && s.stage == Stage::Probs && !lt.sink.shape.empty() && m.square) {
    m.sink_w = fs * 2.2f;  // the sink's column and a gap
    m.left += m.sink_w;
  }
  m.top = fs * 1.4f;
  // The weights of a row as bars under the matrix; presenting, the room goes to the matrix.
  const bool strip = m.square && !s.presentation;
  const float strip_h = strip ? fs * 3.6f : 0.f;

  ImGui::BeginChild("matrix", ImVec2(width, height), false,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  m.origin = ImGui::GetCursorScreenPos();
  m.vp0 = m.origin + ImVec2(m.left, m.top);
  m.vp = ImVec2(std::max(8.f, width - m.left - fs * 0.5f), std::max(8.f, height - m.top - strip_h - fs * 0.5f));
  fit_cell_ = std::min(m.vp.x / static_cast<float>(m.cols), m.vp.y / static_cast<float>(m.rows));
  // Whole pixels per cell keep the cells even; presenting, the matrix fills its room instead.
  fit_cell_ = std::clamp(fit_cell_ >= 3.f && !s.presentation ? std::floor(fit_cell_) : fit_cell_, 1e-3f, kMaxCellPx);
  set_frame(view_, m.rows, m.cols, m.vp.x, m.vp.y, fit_cell_);
  // AppState::cell_px is the zoom the settings keep (0: fit; the "fit" button sets it).
  if (s.cell_px <= 0.f && view_.zoomed())
    fit_view(view_);
  else if (s.cell_px > 0.f && std::fabs(s.cell_px - view_.zoom) > 1e-3f * s.cell_px)
    zoom_at(view_, s.cell_px, m.vp.x * 0.5f, m.vp.y * 0.5f);
  if (pending_goto_ >= 0) {
    apply_go_to(ctx, pending_goto_, m.rows, m.cols);
    pending_goto_ = -1;
  }
  handle_input(ctx, m, m.vp0, m.vp);
  s.cell_px = view_.zoomed() ? view_.zoom : 0.f;

  m.cell = view_.zoom;
  m.p0 = m.vp0 - ImVec2(view_.x0, view_.y0) * view_.zoom;
  m.img = ImVec2(m.cell * static_cast<float>(m.cols), m.cell * static_cast<float>(m.rows));
  m.vis = visible_cells(view_);
  update_texture(data, m.rows, m.cols, ImGui::GetTime() - last_input_ < kInteractionS);

  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 shown(std::min(m.vp.x, m.img.x),
                     std::min(m.vp.y, m.img.y));  // the part of the viewport the matrix covers
  image_rect_ = ImVec4(m.vp0.x, m.vp0.y, shown.x, shown.y);
  dl->PushClipRect(m.vp0, m.vp0 + shown, true);
  if (tex_.valid() && grid_.s > 0) {  // texel (y, x) over cells [(ty0 + y)·s, (ty0 + y + 1)·s) × columns alike
    const float gs = static_cast<float>(grid_.s);
    const ImVec2 c0(static_cast<float>(grid_.tx0) * gs, static_cast<float>(grid_.ty0) * gs);
    const ImVec2 held(static_cast<float>(grid_.w) * gs, static_cast<float>(grid_.h) * gs);
    add_opaque_image(dl, tex_.id(), m.p0 + c0 * m.cell, m.p0 + (c0 + held) * m.cell, ImVec2(0, 0),
                     ImVec2(static_cast<float>(grid_.w) / static_cast<float>(tex_.width()),
                            static_cast<float>(grid_.h) / static_cast<float>(tex_.height())));
  }
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const ImVec4 mr = minimap_rect(m.vp0, m.vp);
  const bool over_minimap =
      mr.z > 0.f && mouse.x >= mr.x && mouse.y >= mr.y && mouse.x < mr.x + mr.z && mouse.y < mr.y + mr.w;
  const bool hovered = ImGui::IsItemHovered() && drag_ != Drag::Minimap && !moved_ && !over_minimap &&
                       mouse.x < m.vp0.x + shown.x && mouse.y < m.vp0.y + shown.y;
  draw_highlights(ctx, m, hovered);
  dl->PopClipRect();
  if (ctx.chat && ctx.chat->marks.active()) draw_chat_turns(ctx, m, shown);
  draw_axis_labels(ctx, m);
  sink_rect_ = ImVec4(0, 0, 0, 0);
  if (m.sink_w > 0.f) draw_sink_column(ctx, m);
  draw_minimap(data, m.vp0, m.vp);
  if (strip)
    draw_row_strip(ctx, m, m.vp0, m.vp, strip_h);
  else
    strip_row_ = -1;
  ImGui::EndChild();
}

// Under the matrix: row r's attention weights (the softmax of this head, or the rollout) as
// bars under the columns in view, max-pooled where columns are narrower than a pixel, and
// its strongest keys named. r: the hovered row, else the selected one, else the query.
void HeatmapPanel::draw_row_strip(FrameContext& ctx, const MatrixLayout& m, ImVec2 vp0, ImVec2 vp, float strip_h) {
  const AppState& s = ctx.state;
  const Trace& tr = ctx.trace;
  const int T = m.rows;
  int r = hover_i_ >= 0 ? hover_i_ : sel_i_ >= 0 && sel_i_ < T ? sel_i_ : s.query >= 0 && s.query < T ? s.query : T - 1;
  strip_row_ = r;
  if (r < 0 || T != m.cols) return;
  const LayerTrace& lt = tr.layers[s.layer];
  // A linear layer's row of A is signed: the bars show |A|, coloured by the sign.
  const bool linear = !rollout_ && lt.mixer == Mixer::GatedDeltaNet;
  const float* row = rollout_ ? values_.data() + static_cast<size_t>(r) * T
                              : lt.row_values(linear ? Stage::Implicit : Stage::Probs, s.head, r, strip_buf_);  // (T)
  std::vector<float> mag;  // (T) |A[r, ·]| of a linear layer
  double row_sum = 0;
  if (linear) {
    mag.resize(static_cast<size_t>(T));
    for (int j = 0; j < T; ++j) mag[static_cast<size_t>(j)] = std::fabs(row[j]), row_sum += j <= r ? row[j] : 0.f;
  }
  const float* signed_row = row;
  if (linear) row = mag.data();
  const TextShading top = shade_tokens(row, T, r, 0, rollout_ ? 0 : lt.window, 5);
  const float fs = ImGui::GetFontSize();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float y0 = vp0.y + std::min(vp.y, m.img.y) + fs * 0.35f, bar_h = fs * 1.7f;
  const float x_end = vp0.x + std::min(vp.x, m.img.x);
  dl->AddRectFilled(ImVec2(vp0.x, y0), ImVec2(x_end, y0 + bar_h), IM_COL32(255, 255, 255, 14));
  const float top_w = top.max_weight > 0.f ? top.max_weight : 1.f;
  auto is_top = [&](int j0, int j1) {
    for (int k : top.top_keys)
      if (k >= j0 && k < j1) return true;
    return false;
  };
  const ImU32 bar_col = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const CellRect cols{0, 1, m.vis.c0, m.vis.c1};
  int one = 0, bins = 0;
  texel_grid(cols, m.cell, &one, &bins);  // (1, bins): a bar per column, or per pixel when narrower
  pool_cells(row, 1, T, cols, 1, bins, PoolMode::Max, PoolMask{}, strip_bins_, nullptr, &bins);
  dl->PushClipRect(ImVec2(vp0.x, y0), ImVec2(x_end, y0 + bar_h), true);
  const float gap = m.cell >= 4.f ? 1.f : 0.f;
  for (int b = 0; b < bins; ++b) {
    const CellRect blk = texel_block(cols, 1, bins, 0, b);
    const float v = strip_bins_[b];
    if (!(v > 0.f)) continue;
    const float x0 = m.p0.x + static_cast<float>(blk.c0) * m.cell + gap,
                x1 = std::max(x0 + 1.f, m.p0.x + static_cast<float>(blk.c1) * m.cell - gap);
    const float hgt = std::max(1.f, std::min(1.f, v / top_w) * bar_h);
    // A linear layer's bar of one column: red where A > 0, blue where A < 0 (the heatmap's).
    const ImU32 sign_col = !linear || blk.c1 - blk.c0 != 1 ? bar_col
                           : signed_row[blk.c0] >= 0.f     ? IM_COL32(220, 90, 80, 255)
                                                           : IM_COL32(80, 130, 230, 255);
    const ImU32 c = hover_j_ >= blk.c0 && hover_j_ < blk.c1 ? IM_COL32(255, 220, 0, 255)
                    : is_top(blk.c0, blk.c1)                ? kTopKeyColor
                                                            : sign_col;
    dl->AddRectFilled(ImVec2(x0, y0 + bar_h - hgt), ImVec2(x1, y0 + bar_h), c);
  }
  dl->PopClipRect();
  // The row and its strongest keys, one line.
  char sum_buf[32];
  std::snprintf(sum_buf, sizeof sum_buf, "%+.3f", row_sum);
  const std::string sum_text = sum_buf;
  std::string line = "row " + std::to_string(r) + " '" + label_cache_[r] + "'" +
                     (hover_i_ >= 0 ? ""
                      : sel_i_ == r ? " (selected)"
                                    : " (query)") +
                     (rollout_ ? ": rollout" : linear ? ": A" : ": weights") +
                     (linear ? " (bars: |A|, red +, blue \xE2\x88\x92; row \xCE\xA3 = " + sum_text +
                                   ", need not be 1), strongest keys"
                             : " (bars: 0 \xE2\x80\xA6 the largest), strongest keys");
  if (!rollout_ && !linear && !lt.sink.shape.empty()) {  // GPT-OSS: what the row gave its sink
    char sb[48];
    std::snprintf(sb, sizeof sb, "  \xC2\xB7  sink %.3f", lt.sink.data[static_cast<size_t>(s.head * lt.sink.dim(1) + r)]);
    line += sb;
  }
  char buf[64];
  for (int k : top.top_keys) {
    std::snprintf(buf, sizeof buf, linear ? " %+.3f" : " %.3f", signed_row[k]);
    line += "  \xC2\xB7  " + std::to_string(k) + " '" + label_cache_[k] + "'" + buf;
  }
  dl->PushClipRect(ImVec2(m.origin.x, y0), ImVec2(x_end + fs * 20.f, y0 + strip_h), true);
  dl->AddText(ImVec2(vp0.x, y0 + bar_h + fs * 0.25f), ImGui::GetColorU32(ImGuiCol_Text), line.c_str());
  dl->PopClipRect();
}

// Axis labels shrink with the cells (down to 60 % of the UI font), then thin out.
void HeatmapPanel::draw_axis_labels(const FrameContext& ctx, const MatrixLayout& m) const {
  const AppState& s = ctx.state;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize();
  const ImU32 text_col = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 dim_col = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const ImU32 hover_col = IM_COL32(255, 220, 0, 255);
  ImFont* font = ImGui::GetFont();
  // Presenting, labels stay at least 80 % of the (large) font: fewer of them, all readable.
  const float lfs = std::clamp(m.cell * 0.95f, fs * (s.presentation ? 0.8f : 0.6f), fs);
  const float shrink = lfs / fs;
  const std::vector<std::string>& labels = *m.row_labels;
  // Only the rows and columns in view; a step's multiples, so labels stay put while panning.
  const int row_step = std::max(1, static_cast<int>(std::ceil(lfs * 0.9f / m.cell)));
  const float right = m.vp0.x - m.sink_w;  // the labels end before the sink column, if any
  dl->PushClipRect(ImVec2(m.origin.x, m.vp0.y - lfs * 0.5f), ImVec2(right, m.vp0.y + m.vp.y + lfs * 0.5f), true);
  for (int i = m.vis.r0 / row_step * row_step; i < m.vis.r1; i += row_step) {
    const float y = m.p0.y + (static_cast<float>(i) + 0.5f) * m.cell - lfs * 0.5f;
    const std::string& lab = labels[i];
    const float w = ImGui::CalcTextSize(lab.c_str()).x * shrink;
    dl->PushClipRect(ImVec2(m.origin.x, y), ImVec2(right - fs * 0.3f, y + lfs), true);
    dl->AddText(font, lfs, ImVec2(right - fs * 0.3f - w, y), i == s.hovered_token ? hover_col : text_col,
                lab.c_str());
    dl->PopClipRect();
  }
  dl->PopClipRect();
  // Column labels: the key tokens of a (T, T) matrix, the dimension index of Q, K, V, out.
  const float col_w = m.square ? std::min(m.label_w, fs * 3.f) * shrink + lfs * 0.15f
                               : ImGui::CalcTextSize("000").x * shrink + lfs * 0.3f;
  const int col_step = std::max(1, static_cast<int>(std::ceil(col_w / m.cell)));
  dl->PushClipRect(ImVec2(m.vp0.x - col_w * 0.5f, m.origin.y), ImVec2(m.vp0.x + m.vp.x + col_w * 0.5f, m.vp0.y), true);
  for (int j = m.vis.c0 / col_step * col_step; j < m.vis.c1; j += col_step) {
    const float x = m.p0.x + (static_cast<float>(j) + 0.5f) * m.cell;
    const std::string lab = m.square ? labels[j] : std::to_string(j);
    const float w = ImGui::CalcTextSize(lab.c_str()).x * shrink;
    const ImU32 col = m.square ? (j == s.hovered_token ? hover_col : text_col) : dim_col;
    dl->AddText(font, lfs, ImVec2(std::floor(x - w * 0.5f), m.origin.y + m.top - lfs - fs * 0.2f), col, lab.c_str());
  }
  dl->PopClipRect();
}

void HeatmapPanel::draw_sink_column(const FrameContext& ctx, const MatrixLayout& m) {
  const AppState& s = ctx.state;
  const LayerTrace& lt = ctx.trace.layers[s.layer];
  const int T = static_cast<int>(lt.sink.dim(1));
  const float* sink = lt.sink.data.data() + static_cast<int64_t>(s.head) * T;  // (T) row i's p_sink
  const float fs = ImGui::GetFontSize();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float x0 = m.vp0.x - m.sink_w + fs * 0.2f, x1 = m.vp0.x - fs * 0.4f;
  const float y_top = m.vp0.y, y_end = m.vp0.y + std::min(m.vp.y, m.img.y);
  sink_rect_ = ImVec4(x0, y_top, x1 - x0, y_end - y_top);
  dl->AddText(ImVec2(x0, m.origin.y + m.top - fs * 1.2f), ImGui::GetColorU32(ImGuiCol_Text), "sink");
  dl->PushClipRect(ImVec2(x0, y_top), ImVec2(x1, y_end), true);
  const float gap = m.cell >= 4.f ? 1.f : 0.f;
  for (int i = m.vis.r0; i < std::min(m.vis.r1, T); ++i) {
    const Rgb8 c = colormap_rgb(s.probs_colormap, sink[i]);
    const float y0 = m.p0.y + static_cast<float>(i) * m.cell;
    dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, std::max(y0 + 1.f, y0 + m.cell - gap)), IM_COL32(c.r, c.g, c.b, 255));
  }
  dl->PopClipRect();
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  if (ImGui::IsWindowHovered() && mouse.x >= x0 && mouse.x < x1 && mouse.y >= y_top && mouse.y < y_end) {
    const int i = static_cast<int>(std::floor((mouse.y - m.p0.y) / m.cell));
    if (i >= 0 && i < T)
      ImGui::SetTooltip("row %d '%s' gives the sink %.3f\nthis head's learned sink logit is %.3f: an extra softmax "
                        "column, dropped,\nso the row's weights over the tokens sum to %.3f",
                        i, (*m.row_labels)[static_cast<size_t>(i)].c_str(), sink[i], lt.sinks[static_cast<size_t>(s.head)],
                        1.f - sink[i]);
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
  if (sel_i_ >= 0 && sel_i_ < m.rows && sel_j_ >= 0 && sel_j_ < m.cols) {  // the selected cell (a click, go to)
    const ImVec2 c0 = m.p0 + ImVec2(static_cast<float>(sel_j_), static_cast<float>(sel_i_)) * m.cell;
    dl->AddRect(c0 - ImVec2(th, th), c0 + ImVec2(m.cell + th, m.cell + th), kSelectColor, 0.f, 0, th * 1.5f);
  }
  hover_i_ = hover_j_ = -1;
  if (!hovered) return;
  const ImVec2 mouse = ImGui::GetIO().MousePos - m.vp0;
  int i = -1, j = -1;
  if (!cell_at(view_, mouse.x, mouse.y, &i, &j)) return;
  hover_i_ = i, hover_j_ = j;
  s.hover(i);
  const ImVec2 c0 = m.p0 + ImVec2(static_cast<float>(j) * m.cell, static_cast<float>(i) * m.cell);
  dl->AddRect(c0, c0 + ImVec2(m.cell, m.cell), IM_COL32(255, 255, 255, 255), 0.f, 0, th);
  cell_tooltip(ctx, i, j);
}

void HeatmapPanel::draw_chat_turns(const FrameContext& ctx, const MatrixLayout& m, ImVec2 shown) const {
  const ChatMarks& marks = ctx.chat->marks;
  const size_t all = ctx.snap.all_ids.size();
  if (marks.span.size() != all || m.rows <= 0 || static_cast<size_t>(m.rows) > all) return;
  const size_t dropped = all - static_cast<size_t>(m.rows);  // window position t is token dropped + t
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize(), bar = std::max(3.f, fs * 0.22f);
  const float xl = m.vp0.x - m.sink_w - bar - 1.f, yt = m.vp0.y - bar - 1.f;  // the bars, outside the matrix
  const auto role = [&](int t) -> const std::string& { return marks.role_of(dropped + static_cast<size_t>(t)); };
  const auto begins = [&](int t) { return marks.begins(dropped + static_cast<size_t>(t)); };
  // Where each turn begins: lines across the matrix (its rows as queries, its columns as keys).
  dl->PushClipRect(m.vp0, m.vp0 + shown, true);
  for (int t = m.vis.r0; t < m.vis.r1 && t < m.rows; ++t)
    if (begins(t) && !role(t).empty()) {
      const float y0 = m.p0.y + static_cast<float>(t) * m.cell;
      dl->AddLine(ImVec2(m.p0.x, y0), ImVec2(m.p0.x + m.img.x, y0), role_color(role(t), 200), 1.5f);
    }
  for (int t = m.vis.c0; m.square && t < m.vis.c1 && t < m.cols; ++t)
    if (begins(t) && !role(t).empty()) {
      const float x0 = m.p0.x + static_cast<float>(t) * m.cell;
      dl->AddLine(ImVec2(x0, m.p0.y), ImVec2(x0, m.p0.y + m.img.y), role_color(role(t), 200), 1.5f);
    }
  dl->PopClipRect();
  // Each token's role: a bar beside its row, and over its column.
  dl->PushClipRect(ImVec2(xl, m.vp0.y), ImVec2(xl + bar, m.vp0.y + shown.y), true);
  for (int t = m.vis.r0; t < m.vis.r1 && t < m.rows; ++t)
    if (!role(t).empty()) {
      const float y0 = m.p0.y + static_cast<float>(t) * m.cell;
      dl->AddRectFilled(ImVec2(xl, y0), ImVec2(xl + bar, y0 + m.cell), role_color(role(t)));
    }
  dl->PopClipRect();
  if (!m.square) return;
  dl->PushClipRect(ImVec2(m.vp0.x, yt), ImVec2(m.vp0.x + shown.x, yt + bar), true);
  for (int t = m.vis.c0; t < m.vis.c1 && t < m.cols; ++t)
    if (!role(t).empty()) {
      const float x0 = m.p0.x + static_cast<float>(t) * m.cell;
      dl->AddRectFilled(ImVec2(x0, yt), ImVec2(x0 + m.cell, yt + bar), role_color(role(t)));
    }
  dl->PopClipRect();
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
  } else if (stage == Stage::Implicit) {  // a linear layer: A[i, j], its row's sum, β and the decay
    const int h = s.head;
    std::vector<float> buf;
    const float* arow = lt.row_values(Stage::Implicit, h, i, buf);  // (T)
    double sum = 0, pos = 0, neg = 0;
    for (int k = 0; k <= i; ++k) sum += arow[k], (arow[k] >= 0 ? pos : neg) += arow[k];
    const int T = tr.T();
    const float* beta = lt.beta.data.data() + static_cast<int64_t>(h) * T;
    const float* g = lt.decay.data.data() + static_cast<int64_t>(h) * T;
    ImGui::Text("token t = %d '%s'  \xE2\x86\x90  token s = %d '%s'   (layer %d, value head %d)", i, tok(i).c_str(), j,
                tok(j).c_str(), s.layer, h);
    ImGui::Separator();
    if (j > i) {
      ImGui::TextColored(ImVec4(1.f, 0.6f, 0.3f, 1.f), "A[t,s] = 0   (s > t: the memory has not seen token s yet)");
    } else {
      ImGui::Text("A[t,s] = %+.5f   how much of v_s is in o_t", arow[j]);
      // The product of the decays between s and t: how much of s's write is left, before overwrites.
      double kept = 0;
      for (int k = j + 1; k <= i; ++k) kept += g[k];
      ImGui::Text("\xCE\xB2_s = %.4f (how strongly s wrote)   decay e^(g_s+1 + \xE2\x80\xA6 + g_t) = %.4f", beta[j],
                  std::exp(kept));
    }
    ImGui::Text("row t: \xCE\xA3_s A[t,s] = %+.5f  (positive %+.4f, negative %+.4f)", sum, pos, neg);
    ImGui::TextDisabled("rows of A need not sum to 1 and may be negative: the delta rule overwrites\n"
                        "what memory held, it does not average. o_t = \xCE\xA3_s A[t,s]\xC2\xB7v_s exactly.");
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
    // A linear layer stores q, k, v per value head (keys repeated): no KV grouping to apply.
    const int hi = stage_is_kv(stage) && lt.mixer == Mixer::Softmax ? c.kv_head_of(s.layer, s.head) : s.head;
    ImGui::Text("token %d '%s', dimension %d of %d", i, tok(i).c_str(), j, static_cast<int>(t.dim(2)));
    ImGui::Text("%s = %+.5f", stage_label(stage), t.at(hi, i, j));
    if (stage_is_kv(stage) && lt.mixer == Mixer::Softmax)
      ImGui::TextDisabled("KV head %d, shared by query heads of group %d", hi, hi);
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
