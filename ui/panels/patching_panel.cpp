#include "ui/panels/patching_panel.h"

#include <algorithm>
#include <cmath>

#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

namespace {
// Grids estimated under this start by themselves as the prompts change (a small model's
// heads grid: well under a second); larger ones wait for their button.
constexpr double kAutoGflop = 20.0;

}  // namespace

bool PatchingPanel::read_controls(FrameContext& ctx, PatchQuery& q) {
  const float fs = ImGui::GetFontSize();
  ImGui::RadioButton("heads", &kind_, 0);
  ImGui::SameLine();
  ImGui::RadioButton("residual stream", &kind_, 1);
  ImGui::SameLine();
  help_marker("Activation patching: prompt A (the text) runs again with one activation taken from prompt B's run (the "
              "other prompt, under the text in Text & model). Heads: one head's output at every position. Residual "
              "stream: the stream entering one layer at one position. Each cell shows how much that changes the "
              "metric at the position: the logit of the target (by default the token A predicts there), or with "
              "a second token the logit difference A \xE2\x88\x92 B. Red: the patch raises it. The prompts must have the "
              "same number of tokens. Rows: layers; columns: heads, or positions. Position -1: the query (the last token unless "
              "the text view chose one). Computed on a thread of its own; cells B leaves equal to A run no pass.");
  ImGui::PushItemWidth(fs * 7.f);
  ImGui::InputInt("position", &position_);
  ImGui::InputTextWithHint("target", "A's prediction", target_a_, sizeof target_a_);
  ImGui::SameLine();
  ImGui::InputTextWithHint("minus", "nothing", target_b_, sizeof target_b_);
  ImGui::PopItemWidth();
  message_.clear();

  const int ta = ctx.trace.T();
  const Snapshot* other = other_.get();
  const bool b_ready = other && other->trace && other->model == ctx.snap.model && !other->showing_sample;
  if (ctx.state.other_text.empty()) message_ = patch_alignment_problem(ta, 0);
  else if (other && other->showing_sample)
    message_ = "none of prompt B's characters is in this model's vocabulary: type B in the model's language";
  else if (!b_ready)
    message_ = other && !other->error.empty() ? "prompt B: " + other->error : "running prompt B\xE2\x80\xA6";
  else message_ = patch_alignment_problem(ta, other->trace->T());
  const int position = position_ < 0 ? (ctx.state.query < 0 ? ta - 1 : std::min(ctx.state.query, ta - 1)) : position_;
  if (message_.empty() && (position_ < -1 || position >= ta))
    message_ = "position " + std::to_string(position_) + " is outside the text (" + std::to_string(ta) +
               " tokens: 0 \xE2\x80\xA6 " + std::to_string(ta - 1) + "; -1: the query)";
  try {
    q.request.target_ids = patch_targets(*ctx.model, target_a_, target_b_);
  } catch (const std::exception& e) {
    if (message_.empty()) message_ = e.what();
  }
  if (!message_.empty()) {
    if (b_ready || ctx.state.other_text.empty() || (other && (!other->error.empty() || other->showing_sample)))
      error_line(message_);
    else ImGui::TextDisabled("%s", message_.c_str());
    return false;
  }
  q.model = ctx.snap.model;
  q.a = ctx.trace.tokens;
  q.b = other->trace->tokens;
  q.request.kind = kind();
  q.request.position = position;
  return true;
}

void PatchingPanel::draw_content(FrameContext& ctx) {
  grid_rect_ = ImVec4(0, 0, 0, 0);
  PatchQuery q;
  const bool ok = read_controls(ctx, q);
  PatchJob::Status st = job_.status();
  if (ok) {
    const bool current = st.result && st.result_query == q;
    if (current || st.running) asked_ = false;
    const double gflop =
        patch_cost_gflop(*ctx.model, static_cast<int>(q.a.size()), first_difference(q.a, q.b), q.request.position, q.request.kind);
    if (gflop <= kAutoGflop || asked_) {
      job_.request(q);
      asked_ = false;
    } else if (!current && !st.running) {
      char label[96];
      std::snprintf(label, sizeof label, "compute (~%.0f GFLOP)", gflop);
      if (ImGui::Button(label)) job_.request(q, true);
    }
    st = job_.status();
    if (st.stopped && !st.running && !current) {
      ImGui::SameLine();
      if (ImGui::Button("compute again")) job_.request(q, true);
    }
  }
  if (st.running) {
    ++frames_running_;
    const float f = st.total ? static_cast<float>(st.done) / static_cast<float>(st.total) : 0.f;
    ImGui::ProgressBar(f, ImVec2(ImGui::GetFontSize() * 10.f, 0),
                       (std::to_string(st.done) + " / " + std::to_string(st.total) + " cells").c_str());
    ImGui::SameLine();
    if (ImGui::Button("stop")) job_.stop();
  }
  error_line(st.error);
  if (!st.result) {
    if (st.running) ImGui::TextDisabled("computing\xE2\x80\xA6");
    return;
  }
  draw_grid(ctx, st, /*stale=*/!ok || !st.current || st.result_query != q);
}

void PatchingPanel::draw_grid(FrameContext& ctx, const PatchJob::Status& st, bool stale) {
  const PatchResult& r = *st.result;
  const PatchQuery& rq = st.result_query;
  const int L = static_cast<int>(r.grid.size()), cols = L ? static_cast<int>(r.grid[0].size()) : 0;
  if (L == 0 || cols == 0) return;
  const bool heads = rq.request.kind == PatchKind::Heads;
  const Model* m = ctx.model;
  std::string what = "'" + chip_label(token_text(m, r.target_ids[0])) + "'";
  if (r.target_ids.size() > 1) what += " \xE2\x88\x92 '" + chip_label(token_text(m, r.target_ids[1])) + "'";
  ImGui::TextWrapped("logit of %s at position %d: A %.4f, B %.4f (B \xE2\x88\x92 A %+.4f)%s", what.c_str(), r.position, r.clean,
                     r.other, r.other - r.clean, stale ? " \xE2\x80\x94 previous input" : "");
  // The change of every cell from A's own value, uploaded once per grid.
  if (uploaded_ != st.result || !tex_.valid()) {
    change_.resize(static_cast<size_t>(L) * cols);
    float mx = 1e-6f;
    for (int l = 0; l < L; ++l)
      for (int c = 0; c < cols; ++c) {
        const float v = static_cast<float>(r.grid[static_cast<size_t>(l)][static_cast<size_t>(c)] - r.clean);
        change_[static_cast<size_t>(l) * cols + c] = v;
        mx = std::max(mx, std::abs(v));
      }
    range_ = mx;
    colorize_rgba(Colormap::Diverging, change_.data(), L, cols, ValueRange{-mx, mx, true}, rgba_);
    tex_.upload(cols, L, rgba_);
    uploaded_ = st.result;
  }
  const float fs = ImGui::GetFontSize();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float label = fs * 2.4f, header = fs * 1.2f, legend = fs * 1.4f;
  // Heads: square cells; positions: as wide as the panel allows (fractions of a pixel when T is large).
  float cw = (avail.x - label) / cols, ch = std::floor((avail.y - header - legend) / L);
  if (heads) cw = ch = std::clamp(std::floor(std::min(cw, ch)), 3.f, fs * 4.f);
  else {
    cw = std::clamp(cw >= 2.f ? std::floor(cw) : cw, 0.25f, fs * 4.f);
    ch = std::clamp(ch, 3.f, fs * 2.f);
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos(), g0 = o + ImVec2(label, header);
  const ImU32 tc = ImGui::GetColorU32(ImGuiCol_Text), dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const int cstep = std::max(1, static_cast<int>(std::ceil(fs * 2.2f / cw))), lstep = std::max(1, static_cast<int>(std::ceil(fs / ch)));
  for (int c = 0; c < cols; c += cstep)
    dl->AddText(ImVec2(g0.x + c * cw, o.y), c == (heads ? ctx.state.head : r.position) ? tc : dim,
                ((heads ? "h" : "") + std::to_string(c)).c_str());
  for (int l = 0; l < L; l += lstep)  // unclipped: rows may be lower than the text
    dl->AddText(ImVec2(o.x, g0.y + l * ch + std::max(0.f, (ch - fs) * 0.5f)),
                l == ctx.state.layer ? tc : dim, ("L" + std::to_string(l)).c_str());
  ImGui::SetCursorScreenPos(g0);
  ImGui::Image(tex_.id(), ImVec2(cw * cols, ch * L), ImVec2(0, 0), ImVec2(1, 1), ImVec4(1, 1, 1, stale ? 0.5f : 1.f));
  grid_rect_ = ImVec4(g0.x, g0.y, cw * cols, ch * L);
  const bool hovered = ImGui::IsItemHovered(), clicked = ImGui::IsItemClicked();
  if (heads) {
    const ImVec2 a = g0 + ImVec2(ctx.state.head * cw, ctx.state.layer * ch);
    if (ctx.state.layer < L && ctx.state.head < cols) dl->AddRect(a - ImVec2(1, 1), a + ImVec2(cw + 1, ch + 1), IM_COL32(255, 255, 255, 255));
    if (cw >= fs * 2.4f)
      for (int l = 0; l < L; ++l)
        for (int c = 0; c < cols; ++c) {
          char txt[16];
          std::snprintf(txt, sizeof txt, "%+.2f", change_[static_cast<size_t>(l) * cols + c]);
          const ImVec2 p = g0 + ImVec2(c * cw, l * ch);
          text_centered(dl, p, p + ImVec2(cw, ch), IM_COL32(0, 0, 0, 255), txt);
        }
  }
  if (hovered) {
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const int l = std::clamp(static_cast<int>((mp.y - g0.y) / ch), 0, L - 1);
    const int c = std::clamp(static_cast<int>((mp.x - g0.x) / cw), 0, cols - 1);
    const double v = r.grid[static_cast<size_t>(l)][static_cast<size_t>(c)];
    const double gap = r.other - r.clean;
    ImGui::BeginTooltip();
    if (heads) ImGui::Text("layer %d, head %d's output taken from B", l, c);
    else {
      const auto tok = [&](const std::vector<int>& ids) { return chip_label(token_text(m, ids[static_cast<size_t>(c)])); };
      ImGui::Text("the stream entering layer %d at position %d ('%s' in A, '%s' in B) taken from B", l, c, tok(rq.a).c_str(),
                  tok(rq.b).c_str());
      if (c > r.position) ImGui::TextDisabled("after the metric's position: it cannot see the patch");
    }
    ImGui::Text("metric %.4f, change %+.4f", v, v - r.clean);
    if (std::abs(gap) > 1e-9) ImGui::Text("%.1f%% of B \xE2\x88\x92 A", 100.0 * (v - r.clean) / gap);
    if (heads) ImGui::TextDisabled("click to select the head");
    ImGui::EndTooltip();
    if (clicked) {
      ctx.state.layer = l;
      if (heads) {
        ctx.state.head = c;
        ctx.state.kv_group = m->config.kv_head_of(c);
      }
    }
  }
  ImGui::SetCursorScreenPos(ImVec2(o.x, g0.y + ch * L + fs * 0.2f));
  ImGui::TextDisabled("change \xC2\xB1%.4f (red: raises the metric); %d patched passes, %.0f ms", range_, r.passes, st.ms);
}

}  // namespace attnviz::ui
