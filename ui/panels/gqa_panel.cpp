#include "ui/panels/gqa_panel.h"

#include <algorithm>

#include "ui/panels/head_grid_panel.h"
#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

void GqaPanel::draw_content(FrameContext& ctx) {
  const ModelConfig& c = ctx.model->config;
  if (c.any_linear()) {  // a hybrid: what its kinds of layers keep comes first
    draw_memory(ctx);
    ImGui::Separator();
  }
  // The selected layer's heads (Gemma 4's global layers have fewer KV heads and larger ones).
  const int l = std::clamp(ctx.state.layer, 0, c.n_layer - 1);
  const int KV = c.kv_heads_at(l), G = c.n_head / KV;
  if (c.per_layer_attention())
    ImGui::Text("layer %d: n_head = %d \xC2\xB7 n_kv_head = %d \xC2\xB7 group size = %d \xC2\xB7 head size %d", l, c.n_head, KV, G,
                c.head_size_at(l));
  else
    ImGui::Text("n_head = %d query heads \xC2\xB7 n_kv_head = %d \xC2\xB7 group size = %d", c.n_head, KV, G);
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextWrapped("query head h reads KV head h / (n_head / n_kv_head) = h / %d  (%s)", G,
                     KV == c.n_head ? "MHA: one KV head each" : KV == 1 ? "MQA: one KV head for all" : "GQA");
  if (const int src = c.layer(l).kv_source; src >= 0)
    ImGui::TextWrapped("layer %d keeps no K and V of its own: it reads layer %d's (KV sharing), so it adds nothing to "
                       "the cache", l, src);
  ImGui::PopStyleColor();
  draw_diagram(ctx);
  ImGui::Separator();
  if (!c.any_linear()) {
    draw_memory(ctx);
    ImGui::Separator();
  }
  draw_group(ctx);
}

void GqaPanel::draw_diagram(FrameContext& ctx) {
  const ModelConfig& c = ctx.model->config;
  AppState& s = ctx.state;
  const int l = std::clamp(s.layer, 0, c.n_layer - 1);
  const int H = c.n_head, KV = c.kv_heads_at(l);
  const float fs = ImGui::GetFontSize();
  const float width = ImGui::GetContentRegionAvail().x;
  const float box_h = fs * 1.4f, drop = fs * 2.6f;
  const float qw = std::min(fs * 3.f, (width - fs * 3.f) / static_cast<float>(H));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos() + ImVec2(fs * 3.f, 0);
  dl->AddText(o - ImVec2(fs * 3.f, -box_h * 0.15f), ImGui::GetColorU32(ImGuiCol_TextDisabled), "Q");
  dl->AddText(o - ImVec2(fs * 3.f, -box_h - drop + box_h * 0.85f), ImGui::GetColorU32(ImGuiCol_TextDisabled), "K,V");
  const float kw = static_cast<float>(H) * qw / static_cast<float>(KV);
  for (int h = 0; h < H; ++h) {  // query heads, top row
    const int g = c.kv_head_of(l, h);
    const ImVec2 a = o + ImVec2(static_cast<float>(h) * qw + 1, 0), b = a + ImVec2(qw - 2, box_h);
    const ImVec2 k = o + ImVec2((static_cast<float>(g) + 0.5f) * kw, box_h + drop);
    dl->AddLine(ImVec2(0.5f * (a.x + b.x), b.y), k, group_color(g, KV, 0.8f), std::max(1.f, ctx.scale * 1.5f));
    dl->AddRectFilled(a, b, group_color(g, KV, h == s.head ? 1.f : 0.55f), 3.f);
    if (h == s.head) dl->AddRect(a, b, IM_COL32(255, 255, 255, 255), 3.f, 0, 2.f);
    if (s.ablation.has(s.layer, h)) draw_ablated_mark(dl, a, b, std::max(1.f, ctx.scale * 1.5f));
    if (qw >= fs * 1.2f) text_centered(dl, a, b, IM_COL32(0, 0, 0, 255), std::to_string(h));
    ImGui::SetCursorScreenPos(a);
    ImGui::PushID(h);
    if (ImGui::InvisibleButton("q", b - a)) {
      s.head = h;
      s.kv_group = g;
    }
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("query head %d \xE2\x86\x92 KV head %d = %d / %d", h, g, h, H / KV);
    ImGui::PopID();
  }
  for (int g = 0; g < KV; ++g) {  // KV heads, bottom row
    const ImVec2 a = o + ImVec2(static_cast<float>(g) * kw + 2, box_h + drop), b = a + ImVec2(kw - 4, box_h);
    dl->AddRectFilled(a, b, group_color(g, KV, g == s.kv_group ? 1.f : 0.55f), 3.f);
    if (g == s.kv_group) dl->AddRect(a, b, IM_COL32(255, 255, 255, 255), 3.f, 0, 2.f);
    text_centered(dl, a, b, IM_COL32(0, 0, 0, 255), "kv" + std::to_string(g));
    ImGui::SetCursorScreenPos(a);
    ImGui::PushID(1000 + g);
    if (ImGui::InvisibleButton("kv", b - a)) s.kv_group = g;
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("KV head %d: click to compare its query heads below", g);
    ImGui::PopID();
  }
  ImGui::SetCursorScreenPos(o - ImVec2(fs * 3.f, 0) + ImVec2(0, 2 * box_h + drop + fs * 0.3f));
  ImGui::Dummy(ImVec2(1, 1));
}

// A hybrid: its softmax layers' KV cache, which grows with T, beside the fixed state its
// linear and convolution layers keep instead, with the same sum for a plain transformer of
// as many layers.
void GqaPanel::draw_state_vs_cache(FrameContext& ctx) {
  const ModelConfig& c = ctx.model->config;
  const int64_t T = ctx.trace.T(), L = c.n_layer, KV = c.n_kv_head, d = c.head_size;
  int n_soft = 0, n_lin = 0, n_conv = 0;
  for (int l = 0; l < c.n_layer; ++l) {
    const Mixer m = c.layer(l).mixer;
    (m == Mixer::Softmax ? n_soft : m == Mixer::GatedDeltaNet ? n_lin : n_conv)++;
  }
  ImGui::TextWrapped("memory while generating: a softmax layer keeps every token's K and V (grows with T); a %s layer "
                     "keeps a state of fixed size (the same at any T)",
                     n_lin ? "linear-attention" : "convolution");
  const int64_t state = recurrent_state_bytes(c);
  auto kv = [&](int64_t t) { return kv_cache_bytes_layers(c, t, KV); };
  if (ImGui::BeginTable("statemem", 3, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    ImGui::TableSetupColumn("layers");
    ImGui::TableSetupColumn(("now, T = " + std::to_string(T)).c_str());
    ImGui::TableSetupColumn(("full context, T = " + std::to_string(c.n_ctx)).c_str());
    ImGui::TableHeadersRow();
    auto row = [](const std::string& name, int64_t now, int64_t full, bool dim) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      dim ? ImGui::TextDisabled("%s", name.c_str()) : ImGui::TextUnformatted(name.c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%s", format_bytes(now).c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%s", format_bytes(full).c_str());
    };
    row(std::to_string(n_soft) + " softmax: KV cache (grows)", kv(T), kv(c.n_ctx), false);
    if (n_lin)
      row(std::to_string(n_lin) + " linear: state (" + std::to_string(c.linear.v_heads) + " \xC3\x97 " +
              std::to_string(c.linear.k_dim) + " \xC3\x97 " + std::to_string(c.linear.v_dim) + " + conv)",
          state, state, false);
    if (n_conv) row(std::to_string(n_conv) + " conv: last " + std::to_string(c.short_conv_kernel - 1) + " inputs", state, state, false);
    row("this model", kv(T) + state, kv(c.n_ctx) + state, false);
    row("all " + std::to_string(L) + " layers softmax", kv_cache_bytes(T, KV, d, L), kv_cache_bytes(c.n_ctx, KV, d, L), true);
    ImGui::EndTable();
  }
  // Bars to the scale of the full context: the cache's grows as text is typed, the state's does not.
  const float w = ImGui::GetContentRegionAvail().x, fs = ImGui::GetFontSize();
  const double top = std::max<double>(1.0, static_cast<double>(kv(c.n_ctx) + state));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const float bar = fs * 0.7f;
  dl->AddRectFilled(o, o + ImVec2(static_cast<float>(w * kv(T) / top), bar), IM_COL32(240, 160, 60, 255));
  dl->AddRectFilled(o + ImVec2(0, bar + 2), o + ImVec2(std::max(2.f, static_cast<float>(w * state / top)), 2 * bar + 2),
                    IM_COL32(120, 200, 255, 255));
  ImGui::Dummy(ImVec2(w, 2 * bar + 4));
  ImGui::TextDisabled("orange: KV cache now \xC2\xB7 blue: fixed state \xC2\xB7 full width: both at T = %d", c.n_ctx);
}

void GqaPanel::draw_memory(FrameContext& ctx) {
  const ModelConfig& c = ctx.model->config;
  if (c.any_linear()) return draw_state_vs_cache(ctx);
  const int T = ctx.trace.T(), L = c.n_layer, d = c.head_size, H = c.n_head, KV = c.n_kv_head;
  // Per layer: windows, and Gemma 4's per-layer KV heads, head sizes and shared layers.
  const bool local = c.any_local(), per_layer = c.per_layer_attention();
  int n_local = 0, W = 0, n_shared = 0;
  for (int l = 0; l < L; ++l) n_shared += c.layer(l).kv_source >= 0;
  for (int l = 0; l < L; ++l)
    if (c.layer(l).window > 0) ++n_local, W = std::max(W, c.layer(l).window);
  if (local)  // a local layer never reads a key older than its window again: it keeps W of them
    ImGui::TextWrapped("KV cache = 2 (K and V) \xC3\x97 \xCE\xA3 over layers of entries \xC3\x97 n_kv_head \xC3\x97 d "
                       "\xC3\x97 4 B: a global layer keeps T entries, a local one min(T, W)");
  else
    ImGui::Text("KV cache = 2 (K and V) \xC3\x97 L \xC3\x97 T \xC3\x97 n_kv_head \xC3\x97 d \xC3\x97 4 B (float32)");
  // Bytes with every layer's window (only T entries each when the model has no local layer).
  auto bytes = [&](int64_t t, int kv) {
    return local || per_layer ? kv_cache_bytes_layers(c, t, kv) : kv_cache_bytes(t, kv, d, L);
  };
  if (per_layer)
    ImGui::TextWrapped("each layer with its own n_kv_head and d%s", n_shared ? "; a shared layer keeps none" : "");
  if (ImGui::BeginTable("kvmem", 3, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    ImGui::TableSetupColumn("layout");
    ImGui::TableSetupColumn(("now, T = " + std::to_string(T)).c_str());
    ImGui::TableSetupColumn(("full context, T = " + std::to_string(c.n_ctx)).c_str());
    ImGui::TableHeadersRow();
    struct Row {
      const char* name;
      int kv;
    };
    const Row rows[] = {{"MHA", H}, {"this model", per_layer ? -1 : KV}, {"MQA", 1}};
    for (const Row& r : rows) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      if (r.kv < 0) ImGui::Text("%s (its KV heads)", r.name);
      else ImGui::Text("%s (%d KV head%s)", r.name, r.kv, r.kv == 1 ? "" : "s");
      ImGui::TableNextColumn();
      ImGui::Text("%s", format_bytes(bytes(T, r.kv)).c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%s", format_bytes(bytes(c.n_ctx, r.kv)).c_str());
    }
    if (n_shared) {  // what the sharing saves: every layer keeping its own K and V
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextDisabled("this model, no KV sharing");
      ImGui::TableNextColumn();
      ImGui::TextDisabled("%s", format_bytes(kv_cache_bytes_layers(c, T, -1, 4, true)).c_str());
      ImGui::TableNextColumn();
      ImGui::TextDisabled("%s", format_bytes(kv_cache_bytes_layers(c, c.n_ctx, -1, 4, true)).c_str());
    }
    if (local && !per_layer) {  // what the windows save: the same heads with every layer global
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextDisabled("this model, no windows");
      ImGui::TableNextColumn();
      ImGui::TextDisabled("%s", format_bytes(kv_cache_bytes(T, KV, d, L)).c_str());
      ImGui::TableNextColumn();
      ImGui::TextDisabled("%s", format_bytes(kv_cache_bytes(c.n_ctx, KV, d, L)).c_str());
    }
    ImGui::EndTable();
  }
  if (per_layer)
    ImGui::TextDisabled("%d of %d layers keep K and V (%d read another layer's)", L - n_shared, L, n_shared);
  else if (local)
    ImGui::TextDisabled("= 2 \xC3\x97 (%d global \xC3\x97 %d + %d local \xC3\x97 min(%d, W=%d) = %lld) \xC3\x97 %d \xC3\x97 %d "
                        "\xC3\x97 4 B now", L - n_local, T, n_local, T, W,
                        static_cast<long long>(kv_cache_bytes_layers(c, T, 1, 1) / 2 / d), KV, d);
  else
    ImGui::TextDisabled("= 2 \xC3\x97 %d \xC3\x97 %d \xC3\x97 %d \xC3\x97 %d \xC3\x97 4 B now", L, T, KV, d);
  // A worked example at a real scale: one cached tensor (K) of one layer, 1000 tokens,
  // d = 128, 32 query heads as MHA against 8 shared KV heads.
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextWrapped("example, one layer, K alone, 1000 tokens, d = 128: 1000 \xC3\x97 32 \xC3\x97 128 \xC3\x97 4 B = %s (MHA) vs 1000 \xC3\x97 8 \xC3\x97 128 \xC3\x97 4 B = %s (8 KV heads)",
                      format_bytes(kv_tensor_bytes(1000, 32, 128)).c_str(), format_bytes(kv_tensor_bytes(1000, 8, 128)).c_str());
  ImGui::PopStyleColor();
}

void GqaPanel::draw_group(FrameContext& ctx) {
  const Trace& tr = ctx.trace;
  const ModelConfig& c = ctx.model->config;
  AppState& s = ctx.state;
  if (c.layer(s.layer).mixer != Mixer::Softmax) {  // no KV heads to share in this layer
    ImGui::TextWrapped("layer %d is a %s layer: it has no KV heads. Select a full-attention layer to compare the query "
                       "heads of one KV group.",
                       s.layer, layer_kind(c.layer(s.layer)).c_str());
    return;
  }
  const int KV = c.kv_heads_at(s.layer);  // the layer's own (Gemma 4's global layers have fewer)
  const std::vector<int> hs = query_heads_of(std::min(s.kv_group, KV - 1), c.n_head, KV);
  ImGui::Text("KV group %d, layer %d: query heads", s.kv_group, s.layer);
  for (int h : hs) {
    ImGui::SameLine();
    ImGui::Text("%d", h);
  }
  ImGui::TextDisabled("same K and V, different W_q \xE2\x86\x92 different attention weights:");
  if (serial_ != ctx.snap.trace_serial || layer_ != s.layer || group_ != s.kv_group || cmap_ != s.probs_colormap ||
      heads_.size() != hs.size()) {
    heads_.resize(hs.size());
    for (size_t i = 0; i < hs.size(); ++i) upload_probs(heads_[i], tr, s.layer, hs[i], s.probs_colormap, rgba_);
    serial_ = ctx.snap.trace_serial;
    layer_ = s.layer;
    group_ = s.kv_group;
    cmap_ = s.probs_colormap;
  }
  const float fs = ImGui::GetFontSize();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float gap = fs * 0.5f;
  const float side = std::clamp(std::min((avail.x - gap * static_cast<float>(hs.size())) / static_cast<float>(std::max<size_t>(1, hs.size())),
                                         avail.y - fs * 1.5f),
                                fs * 2.f, fs * 14.f);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (size_t i = 0; i < hs.size(); ++i) {
    if (i) ImGui::SameLine(0, gap);
    ImGui::BeginGroup();
    ImGui::Text("head %d", hs[i]);
    const ImVec2 a = ImGui::GetCursorScreenPos();
    ImGui::PushID(static_cast<int>(i));
    ImGui::Image(heads_[i].id(), ImVec2(side, side));
    if (ImGui::IsItemClicked()) s.head = hs[i];
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("head %d: click to show it in the heatmap", hs[i]);
    ImGui::PopID();
    dl->AddRect(a - ImVec2(1, 1), a + ImVec2(side + 1, side + 1), group_color(s.kv_group, c.n_kv_head), 0.f, 0, 2.f);
    if (hs[i] == s.head) dl->AddRect(a - ImVec2(4, 4), a + ImVec2(side + 4, side + 4), IM_COL32(255, 255, 255, 255), 0.f, 0, 2.f);
    if (s.ablation.has(s.layer, hs[i])) draw_ablated_mark(dl, a, a + ImVec2(side, side), 2.f);
    ImGui::EndGroup();
  }
}

}  // namespace attnviz::ui
