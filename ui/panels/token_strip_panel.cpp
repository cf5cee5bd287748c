#include "ui/panels/token_strip_panel.h"

#include <algorithm>
#include <cmath>

#include "core/limits.h"
#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

void TokenStripPanel::draw_content(FrameContext& ctx) {
  const Trace& tr = ctx.trace;
  const WindowInfo w = window_info(static_cast<int>(ctx.snap.all_ids.size()), tr.block_size);
  draw_controls(ctx, w);

  // Chips in one scrolling row; the bracket under the window.
  const float fs = ImGui::GetFontSize();
  const float chip_h = fs * 1.6f;
  // A model with local layers: a second bracket over the chips, the keys the hovered query
  // sees on the selected layer.
  const bool local = ctx.model && ctx.model->config.any_local();
  // Chat mode: each turn's role over its first chip.
  const bool chat = ctx.chat && ctx.chat->marks.active();
  const float chat_h = chat ? fs * 1.2f : 0.f;
  const float seen_h = (local ? fs * 1.5f : 0.f) + chat_h;
  // A linear-attention layer selected: its β and decay under the bracket, per token.
  const bool writes = ctx.state.layer < static_cast<int>(tr.layers.size()) &&
                      tr.layers[static_cast<size_t>(ctx.state.layer)].mixer == Mixer::GatedDeltaNet &&
                      !tr.layers[static_cast<size_t>(ctx.state.layer)].beta.shape.empty();
  const float writes_h = writes ? fs * 1.3f : 0.f;
  const float strip_h = chip_h + fs * 2.6f + seen_h + writes_h;
  ImGui::BeginChild("chips", ImVec2(0, strip_h + ImGui::GetStyle().ScrollbarSize), false,
                    ImGuiWindowFlags_HorizontalScrollbar);
  const ImVec2 top = ImGui::GetCursorScreenPos();
  const ImVec2 origin = top + ImVec2(0, seen_h);
  const ChipsDrawn chips = draw_chips(ctx, w, origin, chip_h);
  if (chips.win_x0 >= 0) draw_bracket(ctx, chips, origin.y + chip_h + fs * 1.35f);
  if (local && chips.win_x0 >= 0) draw_seen(ctx, origin.y - chat_h - fs * 0.2f);
  if (writes) draw_memory_writes(ctx, origin.y + chip_h + fs * 2.3f, writes_h);
  ImGui::SetCursorScreenPos(top);
  ImGui::Dummy(ImVec2(chips.end_x - origin.x, strip_h));
  // The chips in view (the strip scrolls sideways in a narrow tile).
  const float view_x0 = std::max(origin.x, ImGui::GetWindowPos().x);
  const float view_x1 = std::min(chips.end_x, ImGui::GetWindowPos().x + ImGui::GetWindowWidth());
  strip_rect_ = ImVec4(view_x0, origin.y, std::max(0.f, view_x1 - view_x0), chip_h);
  if (follow_serial_ != ctx.snap.trace_serial) {  // keep the newest token in view
    ImGui::SetScrollHereX(1.f);
    follow_serial_ = ctx.snap.trace_serial;
  }
  ImGui::EndChild();
}

const WindowLimit& TokenStripPanel::window_limit(const FrameContext& ctx) {
  const double now = ImGui::GetTime();
  if (ctx.model != limit_model_ || ctx.snap.backend_name != limit_backend_ || now - limit_at_s_ > 1.0) {
    limit_model_ = ctx.model;
    limit_backend_ = ctx.snap.backend_name;
    limit_at_s_ = now;
    // The worker's engine holds about kTypingTraceCopies traces of the window (the one shown
    // and the one the next key writes, with room to grow), which the next window's replace:
    // their bytes count as available. 10% is left for the pass's own buffers and the rest
    // of the program.
    limit_available_ = 0.9 * (memory_available_bytes() + kTypingTraceCopies * static_cast<double>(ctx.trace.bytes()));
    limit_ = typing_window_limit(ctx.model->config, /*compact=*/limit_backend_ != "gpu", limit_available_);
  }
  return limit_;
}

// The block_size slider (the engine is asked again when it changes) and the counts.
void TokenStripPanel::draw_controls(FrameContext& ctx, const WindowInfo& w) {
  const Trace& tr = ctx.trace;
  AppState& s = ctx.state;
  const WindowLimit& limit = window_limit(ctx);
  const int n_ctx = static_cast<int>(limit.max_T);  // the model's context, or less (memory)
  if (limit.capped() && (s.block_size <= 0 || s.block_size > n_ctx)) s.block_size = n_ctx;
  ImGui::PushItemWidth(ImGui::GetFontSize() * 14.f);
  int bs = s.block_size > 0 ? s.block_size : n_ctx;
  if (ImGui::SliderInt("block_size", &bs, 1, n_ctx, "%d", ImGuiSliderFlags_AlwaysClamp | ImGuiSliderFlags_Logarithmic))
    s.block_size = bs;
  ImGui::PopItemWidth();
  ImGui::SameLine();
  if (ImGui::SmallButton("-")) s.block_size = std::max(1, bs - 1);
  ImGui::SameLine();
  if (ImGui::SmallButton("+")) s.block_size = std::min(n_ctx, bs + 1);
  if (limit.capped()) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(1.f, 0.65f, 0.3f, 1.f), "max %d (memory)", n_ctx);
    const std::string why = "The model's context is " + std::to_string(ctx.model->config.n_ctx) +
                            " tokens, but recording a window that long while typing (two copies with room to grow) would need about " +
                            format_bytes(limit.bytes_at_n_ctx) + " of memory, and about " +
                            format_bytes(limit_available_) + " can be used now. block_size goes up to " +
                            std::to_string(n_ctx) + " tokens; free memory (close other programs) to allow more.";
    help_marker(why.c_str());
  }
  ImGui::SameLine();
  ImGui::Text("  %d token%s typed \xC2\xB7 window T = %d of block_size %d \xC2\xB7 ", w.total, w.total == 1 ? "" : "s",
              tr.T(), tr.block_size);
  ImGui::SameLine(0, 0);
  if (tr.dropped > 0)
    ImGui::TextColored(ImVec4(1.f, 0.65f, 0.3f, 1.f), "%d fell out of the window (greyed)", tr.dropped);
  else
    ImGui::TextDisabled("none dropped");
  help_marker("The model only sees the last block_size tokens (nanoGPT's idx[:, -block_size:]). "
              "Older tokens fall out of the window on the left. Hover a token to highlight its row "
              "(as a query) and column (as a key) in every heatmap.");
  if (s.layer < static_cast<int>(tr.layers.size()) && tr.layers[static_cast<size_t>(s.layer)].mixer == Mixer::GatedDeltaNet) {
    ImGui::SameLine();  // what the bars under the bracket are
    ImGui::TextColored(ImVec4(0.47f, 0.78f, 1.f, 1.f), "bars: \xCE\xB2 (writes)");
    ImGui::SameLine(0, 0);
    ImGui::TextDisabled(" | ");
    ImGui::SameLine(0, 0);
    ImGui::TextColored(ImVec4(0.78f, 0.67f, 1.f, 1.f), "e^g (keeps)");
    ImGui::SameLine(0, 0);
    ImGui::TextDisabled(", layer %d head %d", s.layer, s.head);
  }
}

// One chip per token from `origin`: in-window chips coloured with their window position
// under them, dropped ones grey; hovering gives the id and position.
TokenStripPanel::ChipsDrawn TokenStripPanel::draw_chips(FrameContext& ctx, const WindowInfo& w, ImVec2 origin,
                                                        float chip_h) {
  AppState& s = ctx.state;
  const std::vector<int>& all = ctx.snap.all_ids;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize();
  const float pad = fs * 0.35f, gap = fs * 0.25f;
  float x = origin.x;
  float win_x0 = -1.f, win_x1 = -1.f;
  const int ht = s.hovered_token;
  const bool chat = ctx.chat && ctx.chat->marks.active();
  // Very long texts: the oldest dropped tokens collapse into one "+N" chip.
  const int max_dropped_chips = 64;
  const int first = std::max(0, w.dropped - max_dropped_chips);
  chip_x_.assign(static_cast<size_t>(std::max(0, w.T)), ImVec2(0, 0));
  if (first > 0) {
    const std::string lab = "\xE2\x80\xA6 +" + std::to_string(first);  // … +N
    const float cw = ImGui::CalcTextSize(lab.c_str()).x + 2 * pad;
    dl->AddRectFilled(ImVec2(x, origin.y), ImVec2(x + cw, origin.y + chip_h), IM_COL32(70, 70, 70, 255), 4.f);
    text_centered(dl, ImVec2(x, origin.y), ImVec2(x + cw, origin.y + chip_h), IM_COL32(160, 160, 160, 255), lab);
    x += cw + gap;
  }
  // Only the chips in view are drawn (and can be hovered): a long text has thousands, and
  // drawing them all cost 65,000 vertices a frame at 2,000 tokens.
  const float view_x0 = dl->GetClipRectMin().x - fs, view_x1 = dl->GetClipRectMax().x + fs;
  for (int k = first; k < w.total; ++k) {
    const int id = all[k];
    const bool in_window = k >= w.dropped;
    const int pos = k - w.dropped;  // position in the window
    const std::string lab = chip_label_at(ctx.snap.labels, static_cast<size_t>(k), ctx.model, id);
    const float cw = std::max(ImGui::CalcTextSize(lab.c_str()).x + 2 * pad, chip_h * 0.8f);
    const ImVec2 a(x, origin.y), b(x + cw, origin.y + chip_h);
    if (in_window) {
      if (win_x0 < 0) win_x0 = a.x;
      win_x1 = b.x;
      if (pos < static_cast<int>(chip_x_.size())) chip_x_[static_cast<size_t>(pos)] = ImVec2(a.x, b.x);
    }
    if (b.x < view_x0 || a.x > view_x1) {
      x = b.x + gap;
      continue;
    }
    if (chat) {  // the turn's colour along the chip's top; its role over the turn's first chip
      const std::string& role = ctx.chat->marks.role_of(static_cast<size_t>(k));
      if (!role.empty()) {
        dl->AddRectFilled(ImVec2(a.x, a.y - fs * 0.25f), ImVec2(b.x + gap, a.y - fs * 0.05f), role_color(role));
        if (ctx.chat->marks.begins(static_cast<size_t>(k))) {
          dl->AddLine(ImVec2(a.x - gap * 0.5f, a.y - fs * 1.2f), ImVec2(a.x - gap * 0.5f, b.y), role_color(role), 2.f);
          dl->AddText(ImVec2(a.x + 2.f, a.y - fs * 1.25f), role_color(role), role.c_str());
        }
      }
    }
    if (in_window) {
      dl->AddRectFilled(a, b, chip_color(id), 4.f);
      if (pos == ht) dl->AddRect(a - ImVec2(2, 2), b + ImVec2(2, 2), IM_COL32(255, 220, 0, 255), 4.f, 0, 3.f);
      text_centered(dl, a, b, IM_COL32(0, 0, 0, 255), lab);
      char idx[16];
      std::snprintf(idx, sizeof idx, "%d", pos);
      if (cw >= ImGui::CalcTextSize(idx).x || pos % 5 == 0)
        dl->AddText(ImVec2(a.x + 1, b.y + 1), ImGui::GetColorU32(ImGuiCol_TextDisabled), idx);
    } else {
      dl->AddRectFilled(a, b, IM_COL32(60, 60, 60, 255), 4.f);
      text_centered(dl, a, b, IM_COL32(150, 150, 150, 255), lab);
    }
    ImGui::SetCursorScreenPos(a);
    ImGui::InvisibleButton(("##tok" + std::to_string(k)).c_str(), ImVec2(cw, chip_h));
    if (ImGui::IsItemHovered()) {
      if (in_window) s.hover(pos);
      ImGui::BeginTooltip();
      if (in_window) {
        ImGui::Text("'%s' id %d, window position %d (row and column %d in the heatmaps)", lab.c_str(), id, pos, pos);
        if (ctx.model && ctx.model->config.any_local() && s.layer < ctx.model->config.n_layer) {
          const int W = ctx.model->config.layer(s.layer).window;
          const SeenKeys sk = seen_keys(pos, W);
          if (W > 0)
            ImGui::Text("layer %d, window %d: as a query it sees keys [%d, %d] (%d of them)", s.layer, W, sk.first,
                        sk.last, sk.count());
          else
            ImGui::Text("layer %d is global: as a query it sees keys [0, %d]", s.layer, pos);
        }
      }
      else
        ImGui::Text("'%s' id %d fell out of the window: the model no longer sees it", lab.c_str(), id);
      if (static_cast<size_t>(k) < ctx.snap.labels.size() && !ctx.snap.labels[static_cast<size_t>(k)].bytes.empty())
        ImGui::Text("bytes %s%s", hex_bytes(ctx.snap.labels[static_cast<size_t>(k)].bytes).c_str(),
                    ctx.snap.labels[static_cast<size_t>(k)].continues ? " (continues the character before)" : "");
      ImGui::EndTooltip();
    }
    x = b.x + gap;
  }
  return {x, win_x0, win_x1};
}

// The window bracket at height y:  └──── window: last T of block_size N ────┘
void TokenStripPanel::draw_bracket(const FrameContext& ctx, const ChipsDrawn& chips, float y) const {
  const Trace& tr = ctx.trace;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize();
  const float win_x0 = chips.win_x0, win_x1 = chips.win_x1;
  const ImU32 bc = IM_COL32(120, 200, 255, 255);
  const float th = std::max(2.f, ctx.scale * 2.f);
  dl->AddLine(ImVec2(win_x0, y - fs * 0.4f), ImVec2(win_x0, y), bc, th);
  dl->AddLine(ImVec2(win_x1, y - fs * 0.4f), ImVec2(win_x1, y), bc, th);
  dl->AddLine(ImVec2(win_x0, y), ImVec2(win_x1, y), bc, th);
  char lab[96];
  std::snprintf(lab, sizeof lab, " window: last %d of block_size %d ", tr.T(), tr.block_size);
  const float lw = ImGui::CalcTextSize(lab).x;
  if (lw + fs * 2.f > win_x1 - win_x0) {
    // A narrow window (small block_size): the label goes beside the bracket, which stays visible.
    const float right = win_x1 + fs * 0.3f;
    const float lx = right + lw <= ImGui::GetWindowPos().x + ImGui::GetWindowSize().x || win_x0 - lw - fs * 0.3f < 0.f
                         ? right
                         : win_x0 - lw - fs * 0.3f;
    dl->AddText(ImVec2(lx, y - fs * 0.5f), bc, lab);
    return;
  }
  const float lx = std::max(win_x0, std::min(0.5f * (win_x0 + win_x1) - lw * 0.5f, win_x1 - lw));
  dl->AddRectFilled(ImVec2(lx, y - fs * 0.5f), ImVec2(lx + lw, y + fs * 0.6f), ImGui::GetColorU32(ImGuiCol_WindowBg));
  dl->AddText(ImVec2(lx, y - fs * 0.5f), bc, lab);
}

// Over the chips: the keys the hovered query (the newest token when none is hovered) sees
// on the selected layer, [i − W + 1, i] on a local layer and [0, i] on a global one, beside
// the block_size crop drawn under the chips.
void TokenStripPanel::draw_seen(const FrameContext& ctx, float y) const {
  const int T = static_cast<int>(chip_x_.size());
  if (T == 0 || ctx.state.layer >= ctx.model->config.n_layer) return;
  const int i = ctx.state.hovered_token >= 0 && ctx.state.hovered_token < T ? ctx.state.hovered_token : T - 1;
  const LayerSpec spec = ctx.model->config.layer(ctx.state.layer);
  const SeenKeys sk = seen_keys(i, spec.window);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize();
  const float th = std::max(2.f, ctx.scale * 2.f);
  const ImU32 col = sk.local ? window_color() : IM_COL32(170, 170, 170, 255);
  const float x0 = chip_x_[static_cast<size_t>(sk.first)].x, x1 = chip_x_[static_cast<size_t>(sk.last)].y;
  dl->AddLine(ImVec2(x0, y), ImVec2(x0, y - fs * 0.4f), col, th);
  dl->AddLine(ImVec2(x1, y), ImVec2(x1, y - fs * 0.4f), col, th);
  dl->AddLine(ImVec2(x0, y - fs * 0.4f), ImVec2(x1, y - fs * 0.4f), col, th);
  char lab[128];
  if (sk.local)
    std::snprintf(lab, sizeof lab, " layer %d, window %d: query %d sees keys [%d, %d] ", ctx.state.layer, spec.window, i,
                  sk.first, sk.last);
  else
    std::snprintf(lab, sizeof lab, " layer %d (global): query %d sees keys [0, %d] ", ctx.state.layer, i, i);
  const float lw = ImGui::CalcTextSize(lab).x;
  const float ly = y - fs * 0.4f - fs * 0.55f;
  // Beside the bracket when it is narrow: left of it when the right side has no room.
  float lx = 0.5f * (x0 + x1) - lw * 0.5f;
  if (lw + fs > x1 - x0) lx = x0 - lw - fs * 0.3f >= ImGui::GetWindowPos().x ? x0 - lw - fs * 0.3f : x1 + fs * 0.3f;
  dl->AddRectFilled(ImVec2(lx, ly), ImVec2(lx + lw, ly + fs * 1.05f), ImGui::GetColorU32(ImGuiCol_WindowBg));
  dl->AddText(ImVec2(lx, ly), col, lab);
}

// Under the bracket, for a linear-attention layer's selected value head: per token two bars,
// β_t (how strongly the token writes into the memory, 0 … 1) and e^{g_t} (how much of the
// memory survives the token, 0 … 1), read from the trace.
void TokenStripPanel::draw_memory_writes(const FrameContext& ctx, float y, float height) const {
  const LayerTrace& lt = ctx.trace.layers[static_cast<size_t>(ctx.state.layer)];
  const int T = static_cast<int>(chip_x_.size());
  if (T == 0 || lt.beta.dim(1) != T) return;
  const int h = std::clamp(ctx.state.head, 0, static_cast<int>(lt.beta.dim(0)) - 1);
  const float* beta = lt.beta.data.data() + static_cast<int64_t>(h) * T;    // (T)
  const float* decay = lt.decay.data.data() + static_cast<int64_t>(h) * T;  // (T) g ≤ 0
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float bar = height - ImGui::GetFontSize() * 0.2f;
  const ImU32 write_col = IM_COL32(120, 200, 255, 255), keep_col = IM_COL32(200, 170, 255, 255);
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  for (int t = 0; t < T; ++t) {
    const ImVec2 x = chip_x_[static_cast<size_t>(t)];
    if (x.y <= x.x) continue;  // not in view
    // Under each chip, side by side: β on the left half, e^g on the right, both 0 … 1.
    const float x0 = x.x + 1.f, x1 = std::max(x0 + 2.f, x.y - 1.f), xm = 0.5f * (x0 + x1);
    const float keep = std::exp(decay[t]);
    dl->AddRectFilled(ImVec2(x0, y), ImVec2(x1, y + bar), IM_COL32(255, 255, 255, 18));
    dl->AddRectFilled(ImVec2(x0, y + bar * (1.f - beta[t])), ImVec2(xm - 0.5f, y + bar), write_col);
    dl->AddRectFilled(ImVec2(xm + 0.5f, y + bar * (1.f - keep)), ImVec2(x1, y + bar), keep_col);
    if (mouse.x >= x0 && mouse.x < x1 && mouse.y >= y && mouse.y < y + bar)
      ImGui::SetTooltip("layer %d, value head %d, token %d\n\xCE\xB2 = %.3f: how strongly it writes into the memory\n"
                        "decay g = %.4f: the memory is multiplied by e^g = %.3f as it arrives",
                        ctx.state.layer, h, t, beta[t], decay[t], keep);
  }
}

}  // namespace attnviz::ui
