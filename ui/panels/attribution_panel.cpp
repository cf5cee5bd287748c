#include "ui/panels/attribution_panel.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

bool AttributionPanel::read_controls(FrameContext& ctx, AttributionQuery& q) {
  const int T = ctx.trace.T();
  const float fs = ImGui::GetFontSize();
  ImGui::PushItemWidth(fs * 7.f);
  ImGui::InputInt("position", &position_);
  ImGui::SameLine();
  help_marker("The position whose prediction is split (a window position, 0 is the first token). -1: the selected "
              "query, which is the last token unless the text view or the logit lens chose one.");
  const int position = position_ < 0 ? (ctx.state.query < 0 ? T - 1 : std::min(ctx.state.query, T - 1)) : position_;
  position_error_.clear();
  if (position_ < -1 || position >= T)
    position_error_ = "position " + std::to_string(position_) + " is outside the text (" + std::to_string(T) +
                      " tokens: 0 \xE2\x80\xA6 " + std::to_string(T - 1) + "; -1: the query)";
  error_line(position_error_);
  ImGui::InputTextWithHint("target", "the predicted token", target_a_, sizeof target_a_);
  ImGui::SameLine();
  ImGui::InputTextWithHint("minus", "nothing", target_b_, sizeof target_b_);
  ImGui::SameLine();
  help_marker("The token whose logit is split, as text (one token of the model's tokenizer, e.g. ' Paris' with its "
              "space); empty: the token the model predicts there. With a second token, the split is of the logit "
              "difference A \xE2\x88\x92 B.");
  ImGui::PopItemWidth();
  target_error_.clear();
  q.target_ids.clear();
  try {
    if (target_a_[0]) q.target_ids.push_back(target_token_id(*ctx.model, target_a_));
    if (target_b_[0]) {
      if (!target_a_[0]) throw Error("give the target A first (the difference is A \xE2\x88\x92 B)", ErrorKind::Usage);
      q.target_ids.push_back(target_token_id(*ctx.model, target_b_));
    }
  } catch (const std::exception& e) {
    target_error_ = e.what();
  }
  error_line(target_error_);
  q.model = ctx.snap.model;
  q.trace = ctx.snap.trace;
  q.position = position;
  return position_error_.empty() && target_error_.empty();
}

void AttributionPanel::draw_content(FrameContext& ctx) {
  grid_rect_ = ImVec4(0, 0, 0, 0);
  AttributionQuery q;
  if (read_controls(ctx, q)) job_.request(q);
  const AttributionJob::Status st = job_.status();
  error_line(st.error);
  if (!st.result) {
    if (st.running) ImGui::TextDisabled("computing\xE2\x80\xA6");
    return;
  }
  draw_parts(ctx, *st.result);
}

void AttributionPanel::draw_parts(FrameContext& ctx, const Attribution& a) {
  const ModelConfig& c = ctx.model->config;
  const int L = static_cast<int>(a.heads.size());
  int H = 0;  // columns: the most heads a layer has (a hybrid's layers differ; a convolution layer has none)
  for (const auto& row : a.heads) H = std::max(H, static_cast<int>(row.size()));
  std::string what = "'" + chip_label(token_text(ctx.model, a.target_ids[0])) + "'";
  if (a.target_ids.size() > 1) what += " \xE2\x88\x92 '" + chip_label(token_text(ctx.model, a.target_ids[1])) + "'";
  double head_sum = 0, mlp_sum = 0;
  for (const auto& row : a.heads)
    for (double v : row) head_sum += v;
  for (double v : a.mlp) mlp_sum += v;
  double conv_sum = 0;
  for (double v : a.conv) conv_sum += v;
  ImGui::TextWrapped("logit of %s at position %d: %.4f; sum of the parts: %.4f", what.c_str(), a.position, a.logit, a.sum);
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  if (c.short_conv_kernel > 0)
    ImGui::TextWrapped("heads %.3f + convolutions %.3f (in the MLP column's tooltips) + MLPs %.3f + embeddings %.3f + "
                       "rest %.3f. The final norm's scale and the convolutions' gates are frozen at the run's values.",
                       head_sum, conv_sum, mlp_sum, a.embed, a.rest);
  else
    ImGui::TextWrapped("heads %.3f + MLPs %.3f + embeddings %.3f + rest %.3f. The final norm's scale is frozen at the "
                       "run's value (%.4g)%s.", head_sum, mlp_sum, a.embed, a.rest, a.norm_scale,
                       c.any_linear() ? ", and so are the gates and the linear layers' gated norms" : "");
  ImGui::PopStyleColor();
  double range = 1e-9, bar_range = 1e-9;
  for (const auto& row : a.heads)
    for (double v : row) range = std::max(range, std::abs(v));
  for (double v : a.mlp) bar_range = std::max(bar_range, std::abs(v));
  bar_range = std::max({bar_range, std::abs(a.embed), std::abs(a.rest)});

  const float fs = ImGui::GetFontSize();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float label = fs * 2.4f, head_row = fs * 1.2f, bar_w = std::round(std::min(fs * 10.f, avail.x * 0.25f));
  const float extra_rows = 2.f;  // embeddings and rest under the grid
  const float cell = std::clamp(std::floor(std::min((avail.x - label - bar_w - fs) / std::max(1, H),
                                                    (avail.y - head_row - fs * 2.f) / (L + extra_rows))),
                                fs * 0.6f, fs * 4.f);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const ImU32 tc = ImGui::GetColorU32(ImGuiCol_Text), dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const float bx = o.x + label + H * cell + fs;  // the MLP bars' column
  // Labels on every head and layer when they fit, else on every few.
  const int hstep = static_cast<int>(std::ceil(fs * 1.8f / cell)), lstep = static_cast<int>(std::ceil(fs * 1.05f / cell));
  for (int h = 0; h < H; ++h)
    if (h % hstep == 0)
      dl->AddText(o + ImVec2(label + h * cell, 0), dim, ("h" + std::to_string(h)).c_str());  // unclipped: cells may be narrow
  text_centered(dl, ImVec2(bx, o.y), ImVec2(bx + bar_w, o.y + fs), dim, "MLP");
  const ImVec2 mp = ImGui::GetIO().MousePos;
  const bool hovered = ImGui::IsWindowHovered();
  for (int l = 0; l < L; ++l) {
    const float y = o.y + head_row + l * cell;
    if (l % lstep == 0)
      text_centered(dl, ImVec2(o.x, y), ImVec2(o.x + label, y + cell), l == ctx.state.layer ? tc : dim, "L" + std::to_string(l));
    for (int h = 0; h < static_cast<int>(a.heads[static_cast<size_t>(l)].size()); ++h) {
      const double v = a.heads[static_cast<size_t>(l)][static_cast<size_t>(h)];
      const ImVec2 p0(o.x + label + h * cell, y), p1 = p0 + ImVec2(cell - 1, cell - 1);
      dl->AddRectFilled(p0, p1, to_u32(colormap_rgb(Colormap::Diverging, static_cast<float>(0.5 + 0.5 * v / range))));
      if (l == ctx.state.layer && h == ctx.state.head) dl->AddRect(p0 - ImVec2(1, 1), p1 + ImVec2(1, 1), IM_COL32(255, 255, 255, 255));
      if (hovered && mp.x >= p0.x && mp.x < p1.x + 1 && mp.y >= p0.y && mp.y < p1.y + 1) {
        ImGui::SetTooltip("layer %d, %s %d: %+.4f of the logit\nclick to select the head", l,
                          c.layer(l).mixer == Mixer::GatedDeltaNet ? "linear-attention value head" : "head", h, v);
        if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
          ctx.state.layer = l, ctx.state.head = h;
          if (h < c.n_head) ctx.state.kv_group = c.kv_head_of(h);
        }
      }
    }
    const double mv = a.mlp[static_cast<size_t>(l)];
    value_bar(dl, ImVec2(bx, y), ImVec2(bx + bar_w, y + cell - 1), mv, bar_range);
    const bool conv = c.layer(l).mixer == Mixer::ShortConv;
    if (conv)  // the convolution's part, where the heads would be
      text_centered(dl, ImVec2(o.x + label, y), ImVec2(bx - fs, y + cell), dim,
                    "convolution " + std::to_string(a.conv[static_cast<size_t>(l)]).substr(0, 7));
    if (hovered && mp.x >= bx && mp.x < bx + bar_w && mp.y >= y && mp.y < y + cell)
      ImGui::SetTooltip(conv ? "layer %d's MLP: %+.4f of the logit\nits convolution: %+.4f" : "layer %d's MLP: %+.4f of the logit",
                        l, mv, conv ? a.conv[static_cast<size_t>(l)] : 0.0);
  }
  grid_rect_ = ImVec4(o.x + label, o.y + head_row, H * cell, L * cell);
  // The embeddings and the rest, as bars on the same scale as the MLPs.
  const float ry = o.y + head_row + L * cell + fs * 0.3f, rh = std::max(cell, fs * 1.1f);
  const struct {
    const char* name;
    double v;
    const char* tip;
  } parts[] = {{"embeddings", a.embed, "the token (and position) embedding"},
               {"rest", a.rest, "the biases: the attention output's, the MLPs' last, the final norm's"}};
  for (int k = 0; k < 2; ++k) {
    const float y = ry + k * rh;
    dl->AddText(ImVec2(o.x, y), dim, parts[k].name);
    value_bar(dl, ImVec2(bx, y), ImVec2(bx + bar_w, y + rh - 2), parts[k].v, bar_range);
    char txt[32];
    std::snprintf(txt, sizeof txt, "%+.3f", parts[k].v);
    dl->AddText(ImVec2(bx - ImGui::CalcTextSize(txt).x - fs * 0.3f, y), tc, txt);
    if (hovered && mp.y >= y && mp.y < y + rh && mp.x >= o.x && mp.x < bx + bar_w)
      ImGui::SetTooltip("%s: %+.4f of the logit (%s)", parts[k].name, parts[k].v, parts[k].tip);
  }
  ImGui::Dummy(ImVec2(bx + bar_w - o.x, ry + 2 * rh - o.y));
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextWrapped("heads: \xC2\xB1%.3f (red: pushes the logit up), bars: \xC2\xB1%.3f", range, bar_range);
  ImGui::PopStyleColor();
}

}  // namespace attnviz::ui
