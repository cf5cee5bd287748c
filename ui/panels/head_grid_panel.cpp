#include "ui/panels/head_grid_panel.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ui/draw/imgui_util.h"
#include "ui/state/window_paint.h"

namespace attnviz::ui {

void upload_probs(Texture& tex, const Trace& tr, int layer, int head, Colormap cmap, std::vector<uint8_t>& scratch) {
  const LayerTrace& lt = tr.layers[layer];
  if (lt.mixer == Mixer::GatedDeltaNet) {  // |A|, 0 to the head's largest (A is no distribution)
    std::vector<float> mag;
    int n = 0;
    if (!lt.thumbs.shape.empty()) {
      n = static_cast<int>(lt.thumbs.dim(1));
      mag.assign(lt.thumbs.head(head), lt.thumbs.head(head) + static_cast<size_t>(n) * n);
    } else {
      n = tr.T();
      std::vector<float> dense;
      const float* a = lt.head_values(Stage::Implicit, head, dense);
      mag.resize(static_cast<size_t>(n) * n);
      for (size_t i = 0; i < mag.size(); ++i) mag[i] = std::fabs(a[i]);
    }
    float top = 0.f;
    for (float v : mag) top = std::max(top, v);
    colorize_rgba(cmap, mag.data(), n, n, ValueRange{0.f, top > 0.f ? top : 1.f, true}, scratch, /*causal_mask=*/true);
    tex.upload(n, n, scratch);
    return;
  }
  if (!lt.thumbs.shape.empty()) {
    // The max-pooled thumbnail (n, n), exact up to 64 tokens: a thumbnail is at most a few
    // hundred pixels, and colouring every head's (T, T) matrix on each keystroke cost
    // 140 ms a frame at T = 200 on a 24 × 14-head model.
    const int n = static_cast<int>(lt.thumbs.dim(1));
    colorize_rgba(cmap, lt.thumbs.head(head), n, n, ValueRange{0.f, 1.f, true}, scratch, /*causal_mask=*/true);
    paint_outside_window(scratch, n, n, lt.window, lt.thumb_bucket);
    tex.upload(n, n, scratch);
    return;
  }
  const int T = tr.T();
  std::vector<float> dense;
  colorize_rgba(cmap, lt.head_values(Stage::Probs, head, dense), T, T, ValueRange{0.f, 1.f, true}, scratch,
                /*causal_mask=*/true);
  paint_outside_window(scratch, T, T, lt.window);  // a local layer: the keys its window hides
  tex.upload(T, T, scratch);
}

void ThumbAtlas::uv(int l, int h, ImVec2* uv0, ImVec2* uv1) const {
  int sx = 0, sy = 0;
  image_.slot_origin(l, h, &sx, &sy);
  const float tw = static_cast<float>(std::max(tex_.width(), 1)), th = static_cast<float>(std::max(tex_.height(), 1));
  const int n = image_.slot_side();
  *uv0 = ImVec2(static_cast<float>(sx) / tw, static_cast<float>(sy) / th);
  *uv1 = ImVec2(static_cast<float>(sx + n) / tw, static_cast<float>(sy + n) / th);
}

void ThumbAtlas::show(const Trace& tr, const ModelConfig& c, Colormap cmap) {
  if (image_.update(tr, c, cmap, &bands_) || !tex_.valid()) {
    tex_.upload(image_.width(), image_.height(), image_.rgba());
    return;
  }
  for (auto [y0, y1] : bands_) tex_.update_rows(y0, y1 - y0, image_.rgba());
}

void HeadGridPanel::refresh(const FrameContext& ctx) {
  const ModelConfig& c = ctx.model->config;
  const Colormap cmap = ctx.state.probs_colormap;
  const int W = grid_columns(c);
  const size_t count = static_cast<size_t>(c.n_layer) * static_cast<size_t>(W);
  if (serial_ == ctx.snap.trace_serial && cmap_ == cmap && shown_count_ == count) return;
  atlas_.show(ctx.trace, c, cmap);
  shown_count_ = count;
  scores_ = ctx.head_scores();
  serial_ = ctx.snap.trace_serial;
  cmap_ = cmap;
}

void HeadGridPanel::draw_content(FrameContext& ctx) {
  const ModelConfig& c = ctx.model->config;
  AppState& s = ctx.state;
  const int L = c.n_layer, H = grid_columns(c), KV = c.n_kv_head, G = c.group_size();
  refresh(ctx);

  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  if (s.presentation)  // large fonts: one short line, and the room goes to the thumbnails
    ImGui::TextWrapped("same frame colour = same KV head");
  else if (c.any_linear())
    ImGui::TextWrapped("%d layers of two kinds \xC2\xB7 full: softmax, %d query heads (KV groups of %d) \xC2\xB7 %s \xC2\xB7 click "
                       "one to select it",
                       L, c.n_head, G,
                       c.linear.v_heads > 0 ? "linear: |A| of the delta rule, one value head each (same frame colour = same key head)"
                                            : "conv: a short convolution, no attention weights");
  else
    ImGui::TextWrapped("%d layers \xC3\x97 %d heads \xC2\xB7 click one to select it \xC2\xB7 same frame colour = same KV head (%d groups of %d)",
                       L, H, KV, G);
  ImGui::PopStyleColor();
  if (c.any_linear())
    ImGui::TextDisabled("head ablation does not cover hybrid models yet");
  else
    draw_ablation_controls(ctx);
  ExportOptions what;  // every layer and head, as this grid shows them
  what.stage = Stage::Probs;
  what.colormap = s.probs_colormap;
  if (!s.presentation) export_.draw(ctx, what);
  const float fs = ImGui::GetFontSize();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  GridLayout g;
  // Models whose layers differ (local / global windows, layers without RoPE): a wider label
  // column that says which each layer is.
  bool mixed = c.any_local() || c.any_linear();
  for (int l = 0; l < L && !mixed; ++l) mixed = !c.layer(l).rope && c.arch != Arch::Gpt2;
  g.row_label = fs * (mixed ? 5.2f : 2.2f), g.head_row = fs * 1.2f, g.gap = std::max(3.f, fs * 0.3f);
  g.side = std::min((avail.x - g.row_label) / static_cast<float>(H) - g.gap,
                    (avail.y - g.head_row - fs * 0.5f) / static_cast<float>(L) - g.gap);
  g.side = std::clamp(std::floor(g.side), fs * 1.5f, fs * 12.f);

  ImGui::BeginChild("grid", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
  g.o = ImGui::GetCursorScreenPos();
  draw_header(ctx, g);
  const ImU32 tc = ImGui::GetColorU32(ImGuiCol_Text), dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  ImGui::GetWindowDrawList()->ChannelsSplit(2);  // 0: the thumbnails, 1: frames, labels and marks over them
  ImGui::GetWindowDrawList()->ChannelsSetCurrent(1);
  for (int l = 0; l < L; ++l) {
    const float y = g.o.y + g.head_row + fs * 0.3f + static_cast<float>(l) * (g.side + g.gap);
    if (mixed)
      draw_layer_label(ctx, l, ImVec2(g.o.x, y), ImVec2(g.o.x + g.row_label - g.gap, y + g.side));
    else
      text_centered(ImGui::GetWindowDrawList(), ImVec2(g.o.x, y), ImVec2(g.o.x + g.row_label - g.gap, y + g.side),
                    l == s.layer ? tc : dim, "L" + std::to_string(l));
    for (int h = 0; h < c.heads_at(l); ++h)
      draw_thumbnail(ctx, l, h, ImVec2(g.o.x + g.row_label + static_cast<float>(h) * (g.side + g.gap), y), g.side);
    if (c.heads_at(l) == 0)  // a convolution layer: a band that says why there is nothing to draw
      text_centered(ImGui::GetWindowDrawList(), ImVec2(g.o.x + g.row_label, y),
                    ImVec2(g.o.x + g.row_label + static_cast<float>(H) * (g.side + g.gap), y + g.side), dim,
                    "short convolution over the last " + std::to_string(c.short_conv_kernel) +
                        " tokens: no attention weights to draw");
  }
  ImGui::GetWindowDrawList()->ChannelsMerge();
  ImGui::SetCursorScreenPos(g.o);
  const ImVec2 size(g.row_label + static_cast<float>(H) * (g.side + g.gap),
                    g.head_row + fs * 0.3f + static_cast<float>(L) * (g.side + g.gap));
  ImGui::Dummy(size);
  grid_rect_ = ImVec4(g.o.x + g.row_label, g.o.y + g.head_row + fs * 0.3f, size.x - g.row_label, size.y - g.head_row - fs * 0.3f);
  ImGui::EndChild();
}

// The ablation: how (zero | mean), how many heads, and a reset.
void HeadGridPanel::draw_ablation_controls(FrameContext& ctx) {
  Ablation& a = ctx.state.ablation;
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("ablate:");
  ImGui::SameLine();
  int mode = a.mode == AblationMode::Mean ? 1 : 0;
  ImGui::PushItemWidth(ImGui::GetFontSize() * 5.f);
  const char* modes[] = {"zero", "mean"};
  if (ImGui::Combo("##mode", &mode, modes, 2)) a.mode = mode == 1 ? AblationMode::Mean : AblationMode::Zero;
  ImGui::PopItemWidth();
  ImGui::SameLine();
  if (a.empty()) {
    ImGui::TextDisabled("right-click a head (or X) to switch it off");
  } else {
    ImGui::TextColored(ImVec4(0.95f, 0.3f, 0.3f, 1.f), "%zu off", a.heads.size());
    ImGui::SameLine();
    if (ImGui::SmallButton("reset")) a.heads.clear();
  }
  help_marker("Ablation switches a head off: its output (before the output projection) is replaced by 0 (zero) or by "
              "its mean over the positions of the window (mean), and every later layer and the prediction follow. "
              "The next-token panel then shows the prediction with and without, and the loss change.");
}

// Head numbers on top, with one bar per KV group under the query heads that share it.
void HeadGridPanel::draw_header(const FrameContext& ctx, const GridLayout& g) const {
  const ModelConfig& c = ctx.model->config;
  const int H = grid_columns(c), KV = c.n_kv_head, G = c.group_size();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize();
  const ImU32 tc = ImGui::GetColorU32(ImGuiCol_Text), dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  for (int k = 0; k < KV; ++k) {
    const float x0 = g.o.x + g.row_label + static_cast<float>(k * G) * (g.side + g.gap);
    const float x1 = x0 + static_cast<float>(G) * (g.side + g.gap) - g.gap;
    dl->AddRectFilled(ImVec2(x0, g.o.y + fs * 1.05f), ImVec2(x1, g.o.y + fs * 1.2f), group_color(k, KV));
  }
  for (int h = 0; h < H; ++h) {
    const float x = g.o.x + g.row_label + static_cast<float>(h) * (g.side + g.gap);
    text_centered(dl, ImVec2(x, g.o.y), ImVec2(x + g.side, g.o.y + fs), h == ctx.state.head ? tc : dim, "h" + std::to_string(h));
  }
}

// One head's thumbnail at `a` (side × side): its KV group's frame colour, the selection
// frame, its role tag (prev, ind, 1st for the first token, self) and, hovered, its scores; a click selects it.
void HeadGridPanel::draw_thumbnail(FrameContext& ctx, int l, int h, ImVec2 a, float side) {
  const ModelConfig& c = ctx.model->config;
  AppState& s = ctx.state;
  const bool linear = c.layer(l).mixer == Mixer::GatedDeltaNet;
  // The frame's colour: the KV head a query head reads, or the key head a value head reads.
  const int KV = linear ? c.linear.k_heads : c.n_kv_head, g = linear ? c.linear.key_head(h) : c.kv_head_of(h);
  const int H = grid_columns(c);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize();
  const float th = std::max(2.f, ctx.scale * 2.f);
  const ImVec2 b = a + ImVec2(side, side);
  ImGui::SetCursorScreenPos(a);
  ImGui::PushID(l * H + h);
  ImVec2 uv0, uv1;
  atlas_.uv(l, h, &uv0, &uv1);
  dl->ChannelsSetCurrent(0);  // the images in one channel: one draw call for the whole grid
  ImGui::Image(atlas_.id(), ImVec2(side, side), uv0, uv1);
  dl->ChannelsSetCurrent(1);
  const bool hov = ImGui::IsItemHovered();
  if (ImGui::IsItemClicked()) {
    s.layer = l;
    s.head = h;
    s.kv_group = g;
  }
  if (ImGui::IsItemClicked(ImGuiMouseButton_Right)) s.ablation.toggle(l, h);
  ImGui::PopID();
  dl->AddRect(a - ImVec2(1, 1), b + ImVec2(1, 1), group_color(g, KV), 0.f, 0, th);
  if (l == s.layer && h == s.head)
    dl->AddRect(a - ImVec2(th + 2, th + 2), b + ImVec2(th + 2, th + 2), IM_COL32(255, 255, 255, 255), 0.f, 0, th);
  const bool ablated = s.ablation.has(l, h);
  if (ablated) draw_ablated_mark(dl, a, b, th);
  const HeadScore* scp = find_score(scores_, l, h);
  const HeadScore sc = scp ? *scp : HeadScore{};
  const std::string role = scp ? head_label(sc) : "";
  if (!role.empty() && side >= fs * 2.f) {  // what the head does on this text, on the thumbnail
    const std::string tag = role == "previous-token" ? "prev" : role == "first-token" ? "1st" : role == "induction" ? "ind" : role;
    const ImVec2 ts = ImGui::CalcTextSize(tag.c_str());
    dl->AddRectFilled(ImVec2(a.x, b.y - ts.y), ImVec2(a.x + ts.x + 4, b.y), IM_COL32(0, 0, 0, 190));
    dl->AddText(ImVec2(a.x + 2, b.y - ts.y), IM_COL32(255, 255, 255, 255), tag.c_str());
  }
  if (hov && linear) {
    dl->AddRect(a, b, IM_COL32(255, 220, 0, 255), 0.f, 0, th);
    ImGui::SetTooltip("layer %d (linear attention, gated delta rule), value head %d (key head %d)\n"
                      "the thumbnail shows |A|, A the exact matrix with head output o_t = \xCE\xA3_s A[t,s]\xC2\xB7v_s;\n"
                      "its rows need not sum to 1 and entries may be negative (click to see the signs in the heatmap)",
                      l, h, g);
  } else if (hov) {
    dl->AddRect(a, b, IM_COL32(255, 220, 0, 255), 0.f, 0, th);
    ImGui::SetTooltip("layer %d (%s), head %d (KV head %d)%s\non this text, mean weight on: previous token %.2f, first token "
                      "%.2f, itself (diagonal) %.2f, after an earlier occurrence (induction) %s\n"
                      "entropy of the rows %.2f bits, mean distance %.2f tokens back\n"
                      "click to show it in the heatmap; right-click (or X) to %s it",
                      l, layer_kind(c.layer(l)).c_str(), h, g, ablated ? (s.ablation.mode == AblationMode::Mean ? " ABLATED (mean)" : " ABLATED (zero)") : "",
                      sc.previous_token, sc.first_token, sc.self,
                      sc.induction < 0 ? "n/a" : std::to_string(sc.induction).substr(0, 4).c_str(), sc.entropy_bits,
                      sc.mean_distance, ablated ? "restore" : "ablate");
  }
}

// A layer's label in a model whose layers differ: "L3" over "W=512" (local, in the window
// band's colour) or "global", and "no RoPE" under them for a layer without positions.
void HeadGridPanel::draw_layer_label(const FrameContext& ctx, int l, ImVec2 a, ImVec2 b) const {
  const LayerSpec spec = ctx.model->config.layer(l);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize();
  const bool sel = l == ctx.state.layer;
  const ImU32 tc = ImGui::GetColorU32(sel ? ImGuiCol_Text : ImGuiCol_TextDisabled);
  std::vector<std::pair<std::string, ImU32>> lines = {{"L" + std::to_string(l), tc}};
  if (spec.mixer == Mixer::GatedDeltaNet)
    lines.push_back({"linear", IM_COL32(120, 200, 255, sel ? 255 : 190)});
  else if (spec.mixer == Mixer::ShortConv)
    lines.push_back({"conv", IM_COL32(200, 170, 255, sel ? 255 : 190)});
  else if (spec.window > 0)
    lines.push_back({"W=" + std::to_string(spec.window), sel ? window_color() : window_color(190)});
  else
    lines.push_back({ctx.model->config.any_linear() ? "full" : "global", tc});
  if (!spec.rope && spec.mixer == Mixer::Softmax && ctx.model->config.arch != Arch::Gpt2) lines.push_back({"no RoPE", IM_COL32(255, 170, 80, 255)});
  // Lines as large as the thumbnail lets them be (down to 60 % of the font).
  const float lfs = std::clamp((b.y - a.y) / (static_cast<float>(lines.size()) * 1.05f), fs * 0.6f, fs);
  float y = 0.5f * (a.y + b.y) - lfs * 1.05f * static_cast<float>(lines.size()) * 0.5f;
  for (const auto& [text, col] : lines) {
    const float w = ImGui::CalcTextSize(text.c_str()).x * lfs / fs;
    dl->AddText(ImGui::GetFont(), lfs, ImVec2(b.x - w, y), col, text.c_str());
    y += lfs * 1.05f;
  }
  ImGui::SetCursorScreenPos(a);
  ImGui::PushID(100000 + l);
  ImGui::InvisibleButton("layer", b - a);
  if (ImGui::IsItemHovered() && spec.mixer == Mixer::GatedDeltaNet)
    ImGui::SetTooltip("layer %d: linear attention (gated delta rule). A memory of fixed size per head is decayed, "
                      "partly overwritten and read by each token; no KV cache, no softmax",
                      l);
  else if (ImGui::IsItemHovered() && spec.mixer == Mixer::ShortConv)
    ImGui::SetTooltip("layer %d: gated short convolution. Each channel mixes the last %d tokens through fixed "
                      "weights between two input gates; no attention weights",
                      l, ctx.model->config.short_conv_kernel);
  else if (ImGui::IsItemHovered())
    ImGui::SetTooltip("layer %d: %s%s", l,
                      spec.window > 0 ? ("local, window " + std::to_string(spec.window) + ": query i sees keys [i \xE2\x88\x92 " +
                                         std::to_string(spec.window - 1) + ", i]").c_str()
                                      : "global: query i sees keys [0, i]",
                      spec.rope ? "" : "; no positional encoding (no RoPE) in this layer");
  ImGui::PopID();
}

}  // namespace attnviz::ui
