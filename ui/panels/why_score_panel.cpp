#include "ui/panels/why_score_panel.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

namespace {

// Indices 0 … n−1 ordered by |v| descending, the first k.
std::vector<int> top_by_magnitude(const std::vector<double>& v, int k) {
  std::vector<int> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  const int n = std::min<int>(k, static_cast<int>(order.size()));
  std::partial_sort(order.begin(), order.begin() + n, order.end(),
                    [&](int a, int b) { return std::abs(v[static_cast<size_t>(a)]) > std::abs(v[static_cast<size_t>(b)]); });
  order.resize(static_cast<size_t>(n));
  return order;
}

std::string describe(const StreamPart& p) {
  switch (p.kind) {
    case PartKind::Embed: return "the token embedding";
    case PartKind::Pos: return "the learned position embedding";
    case PartKind::Head: return "head " + std::to_string(p.head) + " of layer " + std::to_string(p.layer) + " (its output through W_O)";
    case PartKind::Mlp: return "the MLP of layer " + std::to_string(p.layer);
    case PartKind::Conv: return "the short convolution of layer " + std::to_string(p.layer);
    case PartKind::Bias: return "the biases (and the norms' own biases)";
  }
  return "";
}

}  // namespace

bool WhyScorePanel::cell(FrameContext& ctx, ScoreQuery& q, std::string& why) const {
  const Trace& t = ctx.trace;
  const ModelConfig& c = ctx.model->config;
  const int T = t.T(), l = ctx.state.layer;
  if (l < 0 || l >= c.n_layer || c.layer(l).mixer != Mixer::Softmax) {
    why = "layer " + std::to_string(l) + " is not softmax attention: it has no q\xC2\xB7k score to explain. Choose a "
          "softmax layer in the head grid.";
    return false;
  }
  const int i = ctx.state.query < 0 ? T - 1 : std::min(ctx.state.query, T - 1);
  int j = ctx.state.key;
  const SeenKeys seen = seen_keys(i, c.layer(l).window);
  if (j < seen.first || j > i) {  // no cell clicked in this row: the row's strongest key
    std::vector<float> scratch;
    const float* row = t.layers[static_cast<size_t>(l)].row_values(Stage::Probs, ctx.state.head, i, scratch);
    j = static_cast<int>(std::max_element(row + seen.first, row + i + 1) - row);
  }
  q.model = ctx.snap.model;
  q.trace = ctx.snap.trace;
  q.layer = l;
  q.head = ctx.state.head;
  q.query = i;
  q.key = j;
  return true;
}

void WhyScorePanel::part_button(FrameContext& ctx, const StreamPart& p, const char* id) {
  const std::string name = part_name(p);
  if (p.kind == PartKind::Head) {
    ImGui::PushID(id);
    if (ImGui::SmallButton(name.c_str())) {
      ctx.state.layer = p.layer;
      ctx.state.head = p.head;
      if (p.head < ctx.model->config.n_head) ctx.state.kv_group = ctx.model->config.kv_head_of(p.head);
    }
    ImGui::PopID();
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s\nclick to select this head", describe(p).c_str());
  } else {
    ImGui::TextUnformatted(name.c_str());
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", describe(p).c_str());
  }
}

void WhyScorePanel::draw_content(FrameContext& ctx) {
  bars_rect_ = ImVec4(0, 0, 0, 0);
  ScoreQuery q;
  std::string why;
  if (!cell(ctx, q, why)) {
    ImGui::TextWrapped("%s", why.c_str());
    return;
  }
  job_.request(q);
  const ScoreJob::Status st = job_.status();
  if (!st.error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.f, 0.4f, 0.4f, 1.f));
    ImGui::TextWrapped("%s", st.error.c_str());
    ImGui::PopStyleColor();
    return;
  }
  if (!st.result || !(st.query == q)) {
    ImGui::TextDisabled("computing\xE2\x80\xA6");
    return;
  }
  const ScoreAttribution& a = *st.result;
  const Trace& t = ctx.trace;
  const std::string qt = chip_label(token_text(ctx.model, t.tokens[static_cast<size_t>(a.query)]));
  const std::string kt = chip_label(token_text(ctx.model, t.tokens[static_cast<size_t>(a.key)]));
  const float p = t.layers[static_cast<size_t>(a.layer)].value(Stage::Probs, a.head, a.query, a.key);
  ImGui::TextWrapped("layer %d head %d: query %d '%s' \xE2\x86\x92 key %d '%s': scaled score %.4f (weight %.3f) = sum of "
                     "%d \xC3\x97 %d terms %.4f",
                     a.layer, a.head, a.query, qt.c_str(), a.key, kt.c_str(), a.score, p, a.P(), a.P(), a.sum);
  ImGui::SameLine();
  help_marker("The score q\xC2\xB7k \xC3\x97 scale of this cell (before the soft-cap and the mask) split into a grid: "
              "what wrote the query side (rows) \xC3\x97 what wrote the key side (columns). The parts are what wrote "
              "the residual stream entering the layer: the embeddings, each earlier head (through its rows of W_O), "
              "each earlier MLP, the biases. Every norm's scale is frozen at its row, so each side is linear in the "
              "parts and the terms sum to the score exactly. Click a cell in the heatmap to explain another score; "
              "click a head's name to select it.");
  draw_terms(ctx, a);
  ImGui::Separator();
  draw_sides(ctx, a);
  ImGui::Separator();
  draw_grid(ctx, a);
}

void WhyScorePanel::draw_terms(FrameContext& ctx, const ScoreAttribution& a) {
  (void)ctx;
  const int P = a.P();
  const std::vector<int> top = top_by_magnitude(a.terms, 8);
  double range = 1e-9;
  for (int t : top) range = std::max(range, std::abs(a.terms[static_cast<size_t>(t)]));
  ImGui::TextDisabled("largest terms (query part \xC3\x97 key part)");
  const float fs = ImGui::GetFontSize(), label_w = fs * 9.f;
  const float bar_w = std::max(fs * 6.f, ImGui::GetContentRegionAvail().x - label_w - fs * 4.f);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const float rh = fs * 1.25f;
  for (size_t r = 0; r < top.size(); ++r) {
    const int t = top[r];
    const double v = a.terms[static_cast<size_t>(t)];
    const std::string label = part_name(a.parts[static_cast<size_t>(t / P)]) + " \xC3\x97 " + part_name(a.parts[static_cast<size_t>(t % P)]);
    const float y = o.y + r * rh;
    dl->AddText(ImVec2(o.x, y), ImGui::GetColorU32(ImGuiCol_Text), label.c_str());
    value_bar(dl, ImVec2(o.x + label_w, y), ImVec2(o.x + label_w + bar_w, y + rh - 2), v, range);
    char txt[32];
    std::snprintf(txt, sizeof txt, "%+.3f", v);
    dl->AddText(ImVec2(o.x + label_w + bar_w + fs * 0.4f, y), ImGui::GetColorU32(ImGuiCol_Text), txt);
  }
  bars_rect_ = ImVec4(o.x + label_w, o.y, bar_w, rh * top.size());
  ImGui::Dummy(ImVec2(label_w + bar_w + fs * 4.f, rh * top.size()));
}

void WhyScorePanel::draw_sides(FrameContext& ctx, const ScoreAttribution& a) {
  if (!ImGui::BeginTable("sides", 2, ImGuiTableFlags_SizingStretchSame)) return;
  ImGui::TableNextRow();
  for (int side = 0; side < 2; ++side) {
    ImGui::TableSetColumnIndex(side);
    const std::vector<double>& v = side == 0 ? a.query_side : a.key_side;
    ImGui::TextDisabled(side == 0 ? "query side: what made q_%d" : "key side: what made k_%d", side == 0 ? a.query : a.key);
    // The largest parts, then the largest heads (an MLP or the embeddings often carry most of
    // a side; the heads among the rest are the circuit's earlier steps).
    std::vector<double> heads_only(v.size(), 0.0);
    for (size_t k = 0; k < v.size(); ++k)
      if (a.parts[k].kind == PartKind::Head) heads_only[k] = v[k];
    double range = 1e-9;
    for (double x : v) range = std::max(range, std::abs(x));
    const auto row = [&](int t, const char* group) {
      const std::string id = std::string(group) + (side == 0 ? "q" : "k") + std::to_string(t);
      part_button(ctx, a.parts[static_cast<size_t>(t)], id.c_str());
      ImGui::SameLine(ImGui::GetFontSize() * 5.f);
      const ImVec2 p0 = ImGui::GetCursorScreenPos();
      const float w = std::max(ImGui::GetContentRegionAvail().x - ImGui::GetFontSize() * 4.f, ImGui::GetFontSize() * 3.f);
      value_bar(ImGui::GetWindowDrawList(), p0, p0 + ImVec2(w, ImGui::GetFontSize()), v[static_cast<size_t>(t)], range);
      ImGui::Dummy(ImVec2(w, ImGui::GetFontSize()));
      ImGui::SameLine();
      ImGui::Text("%+.3f", v[static_cast<size_t>(t)]);
    };
    for (int t : top_by_magnitude(v, 4)) row(t, "all");
    ImGui::TextDisabled("the heads among them:");
    for (int t : top_by_magnitude(heads_only, 3))
      if (heads_only[static_cast<size_t>(t)] != 0.0) row(t, "heads");
  }
  ImGui::EndTable();
}

void WhyScorePanel::draw_grid(FrameContext& ctx, const ScoreAttribution& a) {
  (void)ctx;
  const std::vector<int> rows = top_by_magnitude(a.query_side, 6), cols = top_by_magnitude(a.key_side, 6);
  double range = 1e-9;
  for (int r : rows)
    for (int c : cols) range = std::max(range, std::abs(a.term(r, c)));
  ImGui::TextDisabled("the top parts: query side (rows) \xC3\x97 key side (columns)");
  const float fs = ImGui::GetFontSize(), label_w = fs * 5.5f;
  const float cell_w = std::clamp((ImGui::GetContentRegionAvail().x - label_w) / std::max<size_t>(1, cols.size()), fs * 3.f, fs * 6.f);
  const float cell_h = fs * 1.4f;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  for (size_t c = 0; c < cols.size(); ++c)
    text_centered(dl, o + ImVec2(label_w + c * cell_w, 0), o + ImVec2(label_w + (c + 1) * cell_w, cell_h), dim,
                  part_name(a.parts[static_cast<size_t>(cols[c])]));
  const ImVec2 mp = ImGui::GetIO().MousePos;
  for (size_t r = 0; r < rows.size(); ++r) {
    const float y = o.y + (r + 1) * cell_h;
    dl->AddText(ImVec2(o.x, y + fs * 0.15f), dim, part_name(a.parts[static_cast<size_t>(rows[r])]).c_str());
    for (size_t c = 0; c < cols.size(); ++c) {
      const double v = a.term(rows[r], cols[c]);
      const ImVec2 p0(o.x + label_w + c * cell_w, y), p1 = p0 + ImVec2(cell_w - 1, cell_h - 1);
      const float u = static_cast<float>(0.5 + 0.5 * v / range);
      dl->AddRectFilled(p0, p1, to_u32(colormap_rgb(Colormap::Diverging, u)));
      char txt[24];
      std::snprintf(txt, sizeof txt, "%+.2f", v);
      text_centered(dl, p0, p1, std::abs(u - 0.5f) > 0.3f ? IM_COL32(255, 255, 255, 255) : IM_COL32(20, 20, 20, 255), txt);
      if (ImGui::IsWindowHovered() && mp.x >= p0.x && mp.x < p1.x && mp.y >= p0.y && mp.y < p1.y)
        ImGui::SetTooltip("query part %s \xC3\x97 key part %s: %+.4f",
                          part_name(a.parts[static_cast<size_t>(rows[r])]).c_str(),
                          part_name(a.parts[static_cast<size_t>(cols[c])]).c_str(), v);
    }
  }
  ImGui::Dummy(ImVec2(label_w + cell_w * cols.size(), cell_h * (rows.size() + 1)));
}

}  // namespace attnviz::ui
