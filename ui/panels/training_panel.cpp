#include "ui/panels/training_panel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "ui/draw/imgui_util.h"

namespace attnviz::ui {

namespace {

struct Series {
  const std::vector<int>* xs;    // steps
  const std::vector<float>* ys;  // values at those steps
  ImU32 color;
  float thickness;
};

// Line plots on ImGui's draw list in a box of `size`: x from 0 to x_max (steps), y from lo
// to hi; a dashed vertical marker at step `mark` (≥ 0) labelled `mark_label`.
void line_plot(const char* title, const std::vector<Series>& series, int x_max, float lo, float hi, int mark,
               const char* mark_label, ImVec2 size) {
  ImGui::TextUnformatted(title);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(title, size);
  const ImVec2 p1 = p0 + size;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImU32 frame = ImGui::GetColorU32(ImGuiCol_FrameBg), faint = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  dl->AddRectFilled(p0, p1, frame);
  const float label_w = ImGui::CalcTextSize("0.00").x + 6.f;
  const ImVec2 a(p0.x + label_w, p0.y + 2.f), b(p1.x - 4.f, p1.y - 2.f);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", hi);
  dl->AddText(ImVec2(p0.x + 2.f, a.y), faint, buf);
  std::snprintf(buf, sizeof buf, "%.2f", lo);
  dl->AddText(ImVec2(p0.x + 2.f, b.y - ImGui::GetFontSize()), faint, buf);
  const float span = hi > lo ? hi - lo : 1.f;
  auto at = [&](int x, float y) {
    const float fx = x_max > 0 ? static_cast<float>(x) / static_cast<float>(x_max) : 0.f;
    const float fy = std::clamp((y - lo) / span, 0.f, 1.f);
    return ImVec2(a.x + fx * (b.x - a.x), b.y - fy * (b.y - a.y));
  };
  std::vector<ImVec2> pts;
  for (const auto& s : series) {
    pts.clear();
    for (size_t i = 0; i < s.ys->size() && i < s.xs->size(); ++i)
      if (std::isfinite((*s.ys)[i])) pts.push_back(at((*s.xs)[i], (*s.ys)[i]));
    if (pts.size() >= 2) dl->AddPolyline(pts.data(), static_cast<int>(pts.size()), s.color, 0, s.thickness);
  }
  if (mark >= 0) {
    const float x = at(mark, lo).x;
    const ImU32 red = IM_COL32(230, 70, 60, 255);
    for (float y = a.y; y < b.y; y += 8.f) dl->AddLine(ImVec2(x, y), ImVec2(x, std::min(y + 4.f, b.y)), red, 2.f);
    dl->AddText(ImVec2(std::min(x + 4.f, b.x - ImGui::CalcTextSize(mark_label).x), a.y), red, mark_label);
  }
  if (ImGui::IsItemHovered() && x_max > 0) {
    const float fx = (ImGui::GetIO().MousePos.x - a.x) / std::max(1.f, b.x - a.x);
    ImGui::SetTooltip("step %d", static_cast<int>(std::lround(std::clamp(fx, 0.f, 1.f) * x_max)));
  }
}

}  // namespace

TrainingPanel::TrainingPanel() : Panel("Training", false), form_(form_for_preset("induction-head")) {
  status_ = session_.status();
  std::snprintf(corpus_buf_, sizeof corpus_buf_, "%s", form_.train.corpus.c_str());
}

bool TrainingPanel::settled() const {
  const auto st = session_.status();
  return st->state != SessionState::Running && st->model == shown_;
}

void TrainingPanel::start(AppState& state, int steps) {
  *p_open() = true;
  form_.train.steps = steps;
  form_.train.corpus = corpus_buf_;
  try {
    session_.start(session_options(form_));
    message_.clear();
    follow_ = show_ = true;
    text_set_ = false;
  } catch (const std::exception& e) {
    message_ = e.what();  // the previous run, if any, stays
  }
  status_ = session_.status();
  choose_shown(*status_);
  if (shown_ && shown_->tokenizer && !text_set_) {
    std::vector<std::string> vocab;
    for (int i = 0; i < shown_->tokenizer->vocab_size(); ++i) vocab.push_back(shown_->tokenizer->piece(i));
    state.text = text_for_vocabulary(state.text, vocab);
    text_set_ = true;
  }
}

void TrainingPanel::choose_shown(const SessionStatus& st) {
  if (!st.model) {
    shown_.reset();
    shown_step_ = -1;
    return;
  }
  if (follow_) {
    shown_ = st.model;
    shown_step_ = st.model_step;
    scrub_ = st.model_step;
    return;
  }
  const int step = nearest_kept_step(st.snapshot_steps, scrub_);
  if (step != shown_step_ || !shown_) {
    auto m = session_.snapshot(step);
    if (m) {
      shown_ = m;
      shown_step_ = step;
    }
  }
}

void TrainingPanel::draw_content(FrameContext& ctx) {
  status_ = session_.status();
  const SessionStatus& st = *status_;
  choose_shown(st);
  draw_form();
  draw_controls(ctx, st);
  if (!message_.empty()) ImGui::TextColored(ImVec4(1.f, 0.45f, 0.35f, 1.f), "%s", message_.c_str());
  if (!st.message.empty()) ImGui::TextColored(ImVec4(1.f, 0.6f, 0.2f, 1.f), "%s", st.message.c_str());
  if (st.state == SessionState::Idle) {
    ImGui::TextDisabled("Start a run: every panel then shows the model as it learns.");
    return;
  }
  ImGui::Separator();
  draw_plots(st);
  draw_timeline(st);
  draw_export(ctx, st);
}

void TrainingPanel::draw_form() {
  if (!ImGui::CollapsingHeader("Run", ImGuiTreeNodeFlags_DefaultOpen)) return;
  const bool going = status_->state == SessionState::Running || status_->state == SessionState::Paused;
  ImGui::BeginDisabled(going);
  const char* presets[] = {"induction head (classroom)", "custom shape"};
  int which = form_.preset.empty() ? 1 : 0;
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 14.f);
  if (ImGui::Combo("preset", &which, presets, 2)) {
    if (which == 0) {
      form_ = form_for_preset("induction-head");
      std::snprintf(corpus_buf_, sizeof corpus_buf_, "%s", form_.train.corpus.c_str());
    } else {
      form_.preset.clear();
    }
  }
  if (form_.preset.empty()) {
    int arch = form_.train.arch == "gpt2" ? 0 : 1;
    const char* archs[] = {"gpt2", "llama"};
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6.f);
    if (ImGui::Combo("architecture", &arch, archs, 2)) form_.train.arch = archs[arch];
    const float w = ImGui::GetFontSize() * 6.f;
    ImGui::SetNextItemWidth(w);
    ImGui::InputInt("layers", &form_.train.layers);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(w);
    ImGui::InputInt("width", &form_.train.embd);
    ImGui::SetNextItemWidth(w);
    ImGui::InputInt("heads", &form_.train.heads);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(w);
    ImGui::InputInt("KV heads", &form_.train.kv_heads);
    help_marker("0 = as many as query heads; llama only: fewer KV heads share keys and values (GQA).");
    ImGui::SetNextItemWidth(w);
    ImGui::InputInt("block_size", &form_.train.block_size);
  } else {
    ImGui::TextDisabled("llama, 2 layers, 64 wide, 4 heads, block_size 64, batch 16");
  }
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 14.f);
  if (ImGui::InputText("corpus", corpus_buf_, sizeof corpus_buf_)) form_.train.corpus = corpus_buf_;
  help_marker(
      "builtin:typing (every printable ASCII character: sentences and random strings, each line written twice), "
      "builtin:repeats (random words, each line written twice), or the path of any UTF-8 text file: its "
      "characters are the vocabulary and its last 10% the validation text.");
  const float w = ImGui::GetFontSize() * 6.f;
  ImGui::SetNextItemWidth(w);
  ImGui::SliderFloat("repeat-frac", &form_.train.repeat_frac, 0.f, 1.f, "%.2f");
  help_marker("The share of each batch that repeats a segment: copying is what induction heads do.");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(w);
  ImGui::InputFloat("lr", &form_.train.lr, 0.f, 0.f, "%.0e");
  ImGui::SetNextItemWidth(w);
  ImGui::InputInt("steps", &form_.train.steps, 100, 1000);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(w);
  ImGui::InputScalar("seed", ImGuiDataType_U64, &form_.train.seed);
  ImGui::SetNextItemWidth(w);
  ImGui::InputInt("show every", &form_.publish_every, 5, 50);
  help_marker("Steps between the weights shown in every panel (and the head scores plotted).");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(w);
  ImGui::InputInt("snapshot every", &form_.snapshot_every, 10, 100);
  ImGui::SetNextItemWidth(w);
  ImGui::InputInt("snapshot MB", &form_.budget_mb, 16, 256);
  help_marker("Memory for the timeline's snapshots; over it, the oldest are thinned first.");
  ImGui::EndDisabled();
}

void TrainingPanel::draw_controls(FrameContext& ctx, const SessionStatus& st) {
  const TrainingButtons b = buttons_for(st.state, st.model != nullptr);
  auto button = [](const char* label, bool enabled) {
    ImGui::BeginDisabled(!enabled);
    const bool pressed = ImGui::Button(label);
    ImGui::EndDisabled();
    return pressed;
  };
  if (button("Start", b.start)) start(ctx.state, form_.train.steps);
  ImGui::SameLine();
  if (button("Pause", b.pause)) session_.pause();
  ImGui::SameLine();
  if (button("Resume", b.resume)) {
    session_.resume();
    follow_ = true;
  }
  ImGui::SameLine();
  if (button("Stop", b.stop)) session_.stop();
  ImGui::SameLine();
  if (button("Reset", b.reset)) {
    session_.reset();
    message_.clear();
  }
  ImGui::SameLine();
  ImGui::Checkbox("show in every panel", &show_);
  const float frac = st.steps > 0 ? static_cast<float>(st.step) / static_cast<float>(st.steps) : 0.f;
  char over[128];
  std::snprintf(over, sizeof over, "%s \xC2\xB7 step %d / %d \xC2\xB7 %.0f s", session_state_name(st.state), st.step,
                st.steps, st.elapsed_s);
  ImGui::ProgressBar(frac, ImVec2(-1.f, 0.f), over);
  const std::string note = induction_note(st);
  if (!note.empty()) ImGui::TextColored(ImVec4(0.35f, 0.85f, 0.45f, 1.f), "%s", note.c_str());
}

void TrainingPanel::draw_plots(const SessionStatus& st) {
  const float w = ImGui::GetContentRegionAvail().x;
  const float h = ImGui::GetFontSize() * 5.f;
  const int x_max = std::max(1, st.steps);
  char mark_label[48];
  std::snprintf(mark_label, sizeof mark_label, "induction head, step %d", st.induction_step);
  // Losses: training (every step) and validation (every eval).
  std::vector<int> loss_x(st.train_loss.size());
  for (size_t i = 0; i < loss_x.size(); ++i) loss_x[i] = st.first_step + static_cast<int>(i) + 1;
  float lo = 0.f, hi = 0.f;
  for (float v : st.train_loss) hi = std::isfinite(v) ? std::max(hi, v) : hi;
  for (float v : st.val_loss) hi = std::isfinite(v) ? std::max(hi, v) : hi;
  const ImU32 train_col = IM_COL32(90, 160, 240, 255), val_col = IM_COL32(250, 190, 60, 255);
  char title[96];
  std::snprintf(title, sizeof title, "loss (nats/char): training %.3f, validation %.3f",
                st.train_loss.empty() ? 0.f : st.train_loss.back(), st.val_loss.empty() ? 0.f : st.val_loss.back());
  line_plot(title, {{&loss_x, &st.train_loss, train_col, 2.f}, {&st.val_steps, &st.val_loss, val_col, 2.f}}, x_max, lo,
            std::max(hi, 0.1f), st.induction_step, mark_label, ImVec2(w, h));
  // Head scores, one line per head coloured by layer; the best induction head thick.
  const std::vector<int> xs = score_steps(st);
  const int n = st.scores.empty() ? 0 : static_cast<int>(st.scores.back().heads.size());
  const int best = best_induction_head(st);
  int n_layer = 1;
  for (const auto& hd : st.scores.empty() ? std::vector<HeadScore>{} : st.scores.back().heads)
    n_layer = std::max(n_layer, hd.layer + 1);
  for (const bool induction : {false, true}) {
    std::vector<std::vector<float>> ys(static_cast<size_t>(n));
    std::vector<Series> series;
    for (int i = 0; i < n; ++i) {
      ys[static_cast<size_t>(i)] = head_series(st, i, induction);
      const int layer = st.scores.back().heads[static_cast<size_t>(i)].layer;
      series.push_back({&xs, &ys[static_cast<size_t>(i)], group_color(layer, n_layer + 1, 0.9f),
                        induction && i == best ? 3.f : 1.5f});
    }
    line_plot(
        induction ? "induction score per head (token after the earlier occurrence)" : "previous-token score per head",
        series, x_max, 0.f, 1.f, st.induction_step, mark_label, ImVec2(w, h));
  }
  if (best >= 0) {
    const HeadScore& hb = st.scores.back().heads[static_cast<size_t>(best)];
    ImGui::TextDisabled("lines coloured by layer; thick: layer %d head %d (induction %.2f)", hb.layer, hb.head,
                        hb.induction);
  }
}

void TrainingPanel::draw_timeline(const SessionStatus& st) {
  if (st.snapshot_steps.empty()) return;
  ImGui::SetNextItemWidth(-ImGui::GetFontSize() * 9.f);
  const int last = st.snapshot_steps.back();
  if (ImGui::SliderInt("timeline", &scrub_, st.snapshot_steps.front(), std::max(last, st.model_step))) {
    follow_ = false;
    scrub_ = nearest_kept_step(st.snapshot_steps, scrub_);
  }
  ImGui::SameLine();
  if (ImGui::Checkbox("live", &follow_) && follow_) scrub_ = st.model_step;
  ImGui::TextDisabled("showing the weights of step %d \xC2\xB7 %zu snapshots kept (%.1f MB)", shown_step_,
                      st.snapshot_steps.size(), static_cast<double>(st.snapshot_bytes) / 1e6);
}

void TrainingPanel::draw_export(FrameContext& ctx, const SessionStatus& st) {
  const TrainingButtons b = buttons_for(st.state, st.model != nullptr);
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 12.f);
  ImGui::InputText("##save", save_buf_, sizeof save_buf_);
  ImGui::SameLine();
  ImGui::BeginDisabled(!b.save);
  if (ImGui::Button("Save run")) {
    try {
      session_.save(save_buf_);
      message_ = std::string("saved ") + save_buf_ + ": open it with attnviz --model " + save_buf_;
    } catch (const std::exception& e) {
      message_ = e.what();
    }
  }
  ImGui::EndDisabled();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 12.f);
  ImGui::InputText("##film", film_buf_, sizeof film_buf_);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5.f);
  ImGui::InputInt("frames", &film_frames_);
  film_frames_ = std::clamp(film_frames_, 1, 32);
  ImGui::SameLine();
  if (ImGui::Button("Filmstrip")) {
    try {
      message_ =
          write_session_filmstrip(session_, film_frames_, ctx.state.text, ctx.state.layer, ctx.state.head, film_buf_);
    } catch (const std::exception& e) {
      message_ = e.what();
    }
  }
  help_marker(
      "The selected head's attention weights on the text, at kept snapshots from the first to the newest, "
      "side by side (.png or .svg).");
}

}  // namespace attnviz::ui
