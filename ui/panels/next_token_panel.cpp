#include "ui/panels/next_token_panel.h"

#include <algorithm>
#include <cmath>

#include "core/engine/engine.h"

#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

bool NextTokenPanel::step(FrameContext& ctx, bool greedy) {
  if (!ctx.has_trace()) return false;
  const Trace& tr = ctx.trace;
  const int V = static_cast<int>(tr.logits.dim(1));
  const float* last = tr.logits_row(tr.T() - 1);
  if (seeded_with_ != ctx.state.seed) {
    rng_.seed(ctx.state.seed);
    seeded_with_ = ctx.state.seed;
  }
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  const int id = sample_token(last, V, greedy ? 0.f : ctx.state.temperature, u);
  // The trace may be older than the text (the worker is still busy): sample from the
  // trace, append to the text the trace came from.
  ctx.state.text = ctx.snap.trace_text + token_text(ctx.model, id);
  stepped_on_serial_ = ctx.snap.trace_serial;
  last_step_time_ = ImGui::GetTime();
  return true;
}

const float* NextTokenPanel::logits_at(const FrameContext& ctx, int row) {
  const Trace& tr = ctx.trace;
  if (const float* held = tr.logits_row(row)) return held;
  if (row != row_ || ctx.snap.trace_serial != row_serial_) {
    row_ = row;
    row_serial_ = ctx.snap.trace_serial;
    try {
      row_logits(*ctx.model, tr, row, row_values_);
    } catch (const std::exception&) {
      row_values_.clear();
    }
  }
  return row_values_.empty() ? nullptr : row_values_.data();
}

const std::vector<TokenShift>& NextTokenPanel::top_of(TopCache& c, const float* logits, uint64_t serial, int row, int V, int k,
                                                      float temperature, const float* clean) {
  if (c.logits == logits && c.serial == serial && c.row == row && c.k == k && c.temperature == temperature && c.clean == clean)
    return c.top;
  c.top.clear();
  if (clean) c.top = compare_top_k(logits, clean, V, temperature, k);
  else
    for (const TokenProb& tp : top_k_probs(logits, V, temperature, k)) c.top.push_back({tp.id, tp.p, tp.p});
  c.logits = logits, c.serial = serial, c.row = row, c.k = k, c.temperature = temperature, c.clean = clean;
  return c.top;
}

void NextTokenPanel::draw_content(FrameContext& ctx) {
  const Trace& tr = ctx.trace;
  AppState& s = ctx.state;
  const int V = static_cast<int>(tr.logits.dim(1));
  // The position whose prediction is shown: a hovered token's (its row of logits computed
  // when first asked for: the trace holds only the last row's), else the last one.
  const int hov = s.hovered_token;
  const int row = hov >= 0 && hov < tr.T() - 1 && logits_at(ctx, hov) ? hov : tr.T() - 1;
  const float* last = logits_at(ctx, row);
  const std::string after = chip_label(token_text(ctx.model, tr.tokens[static_cast<size_t>(row)]));

  ImGui::PushItemWidth(ImGui::GetFontSize() * 9.f);
  ImGui::SliderFloat("temperature", &s.temperature, 0.f, 2.f, "%.2f");
  ImGui::SameLine();
  ImGui::SliderInt("top-k", &s.top_k, 1, std::min(40, V));
  ImGui::PopItemWidth();
  help_marker("p = softmax(logits / temperature). Low temperature sharpens the distribution "
              "(0 = always the most likely token), high temperature flattens it.");

  if (ImGui::Button("step \xE2\x96\xB6")) step(ctx, false);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("sample one token and append it to the text (Alt+N)");
  ImGui::SameLine();
  if (ImGui::Button("greedy step")) step(ctx, true);
  ImGui::SameLine();
  if (ImGui::Button(playing_ ? "pause \xE2\x9D\x9A\xE2\x9D\x9A" : "play")) playing_ = !playing_;
  ImGui::TextDisabled("window T = %d of block_size %d, dropped %d", tr.T(), tr.block_size, tr.dropped);
  // Play: one token per new result, at most ~6 per second so a class can follow.
  if (playing_ && ctx.snap.error.empty() && ctx.snap.trace_text == s.text && stepped_on_serial_ != ctx.snap.trace_serial &&
      ImGui::GetTime() - last_step_time_ > 0.15)
    step(ctx, false);
  if (!ctx.snap.error.empty()) playing_ = false;

  // With heads ablated: the prediction with and without them (the grey bar), and the loss.
  const bool compare = !tr.ablation.empty() && static_cast<int>(ctx.snap.clean_logits.size()) == V && row == tr.T() - 1;
  if (compare) {
    ImGui::TextColored(ImVec4(0.95f, 0.35f, 0.35f, 1.f), "heads %s ablated (%s)", tr.ablation.to_string().c_str(),
                       ablation_mode_name(tr.ablation.mode));
    ImGui::Text("loss over the text: %.3f \xE2\x86\x92 %.3f nats (%+.3f)", ctx.snap.clean_loss, ctx.snap.loss,
                ctx.snap.loss - ctx.snap.clean_loss);
    help_marker("Mean next-token loss over the tokens in the window, in nats: without the ablation \xE2\x86\x92 with it. "
                "Below, the coloured bar is the prediction with the heads ablated, the grey bar under it the "
                "prediction of the whole model, and the number in brackets the change in probability.");
  } else {
    ImGui::TextDisabled("loss over the text %.3f nats", ctx.snap.loss);
  }
  ImGui::Text("after '%s' (position %d) the model predicts:", after.c_str(), row);
  const int next = row < tr.T() - 1 ? tr.tokens[static_cast<size_t>(row) + 1] : -1;
  if (next >= 0) {  // a hovered token: what came next in the text (its bar framed), its probability
    const float mx = *std::max_element(last, last + V);
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(static_cast<double>(last[v] - mx));
    const double p = std::exp(static_cast<double>(last[next] - mx)) / sum;
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.f, 0.86f, 0.f, 1.f));
    ImGui::TextWrapped("next in the text: '%s', p = %.3f (loss %.2f nats)", chip_label(token_text(ctx.model, next)).c_str(),
                       p, -std::log(std::max(p, 1e-300)));
    ImGui::PopStyleColor();
  }
  // With prompt B beside it, the top few of each, so both fit.
  const Trace* other = other_trace(ctx);
  const int k = other ? std::min(s.top_k, kOtherTop) : s.top_k;
  const std::vector<TokenShift>& top =
      top_of(top_a_, last, ctx.snap.trace_serial, row, V, k, s.temperature, compare ? ctx.snap.clean_logits.data() : nullptr);
  draw_bars(ctx, top, next, compare, ctx.snap.trace_text, s.text);
  if (other) draw_other(ctx, *other);
}

void NextTokenPanel::draw_bars(FrameContext& ctx, const std::vector<TokenShift>& top, int next, bool compare,
                               const std::string& ran_text, std::string& text) {
  const float fs = ImGui::GetFontSize();
  const float label_w = fs * 3.5f;
  const float bar_w = std::max(fs * 4.f, ImGui::GetContentRegionAvail().x - label_w - fs * (compare ? 8.f : 4.f));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (const TokenShift& tp : top) {
    const std::string lab = chip_label(token_text(ctx.model, tp.id));
    const ImVec2 a = ImGui::GetCursorScreenPos();
    const float h = fs * 1.25f;
    dl->AddRectFilled(a, a + ImVec2(label_w - fs * 0.3f, h), chip_color(tp.id), 3.f);
    text_centered(dl, a, a + ImVec2(label_w - fs * 0.3f, h), IM_COL32(0, 0, 0, 255), lab);
    const ImVec2 b0 = a + ImVec2(label_w, fs * 0.1f);
    dl->AddRectFilled(b0, b0 + ImVec2(bar_w, h - fs * 0.2f), ImGui::GetColorU32(ImGuiCol_FrameBg));
    dl->AddRectFilled(b0, b0 + ImVec2(std::max(1.f, bar_w * tp.p), h - fs * 0.2f), to_u32(colormap_rgb(Colormap::Viridis, 0.35f + 0.65f * tp.p)));
    if (compare)  // the whole model's probability, a thin grey bar along the bottom
      dl->AddRectFilled(b0 + ImVec2(0, h * 0.62f), b0 + ImVec2(std::max(1.f, bar_w * tp.p_clean), h - fs * 0.2f),
                        IM_COL32(200, 200, 200, 200));
    char pct[48];
    if (compare) std::snprintf(pct, sizeof pct, "%5.1f%% (%+.1f)", 100.f * tp.p, 100.f * (tp.p - tp.p_clean));
    else std::snprintf(pct, sizeof pct, "%5.1f%%", 100.f * tp.p);
    dl->AddText(b0 + ImVec2(bar_w + fs * 0.3f, 0), ImGui::GetColorU32(ImGuiCol_Text), pct);
    if (tp.id == next) dl->AddRect(a - ImVec2(1, 1), b0 + ImVec2(bar_w + 1, h - fs * 0.2f + 1), IM_COL32(255, 220, 0, 255), 2.f, 0, 2.f);
    ImGui::PushID(tp.id);
    ImGui::InvisibleButton("bar", ImVec2(label_w + bar_w + fs * 3.5f, h));
    if (ImGui::IsItemHovered()) {
      if (compare)
        ImGui::SetTooltip("'%s' (id %d): p = %.5f with the ablation, %.5f without\nclick to append it", lab.c_str(), tp.id,
                          tp.p, tp.p_clean);
      else
        ImGui::SetTooltip("'%s' (id %d): p = %.5f\nclick to append it", lab.c_str(), tp.id, tp.p);
    }
    if (ImGui::IsItemClicked()) text = ran_text + token_text(ctx.model, tp.id);
    ImGui::PopID();
  }
}

const Trace* NextTokenPanel::other_trace(const FrameContext& ctx) const {
  const Snapshot* b = other_.get();
  if (ctx.state.other_text.empty() || !b || !b->trace || b->model != ctx.snap.model || b->showing_sample) return nullptr;
  const Trace& tb = *b->trace;
  return tb.logits.shape.size() == 2 && tb.logits_row(tb.T() - 1) ? &tb : nullptr;
}

void NextTokenPanel::draw_other(FrameContext& ctx, const Trace& tb) {
  const Snapshot* b = other_.get();
  const float* last = tb.logits_row(tb.T() - 1);
  const int V = static_cast<int>(tb.logits.dim(1));
  ImGui::Spacing();
  ImGui::Text("after '%s' the other prompt (B) predicts:", chip_label(token_text(ctx.model, tb.tokens.back())).c_str());
  if (b->trace_text != ctx.state.other_text) {
    ImGui::SameLine();
    ImGui::TextDisabled("(computing)");
  }
  const std::vector<TokenShift>& top =
      top_of(top_b_, last, b->trace_serial, tb.T() - 1, V, std::min(ctx.state.top_k, kOtherTop), ctx.state.temperature, nullptr);
  ImGui::PushID("other");
  draw_bars(ctx, top, -1, false, b->trace_text, ctx.state.other_text);
  ImGui::PopID();
}

}  // namespace attnviz::ui
