#include "ui/panels/lesson_panel.h"

#include <algorithm>
#include <cstdlib>
#include <cstdio>

#include "core/error.h"
#include "ui/draw/fonts.h"

namespace attnviz::ui {

LessonPanel::LessonPanel() : Panel("Guided lesson", false) {
  files_ = lesson_files();
  for (const std::string& f : files_) {  // the language each file names, English first
    try {
      const Lesson l = load_lesson(f);
      names_.push_back(l.language);
      font_text_ += l.language;
      for (const LessonStep& s : l.steps) font_text_ += s.title + s.body + s.body_sink;
    } catch (const std::exception&) {
      names_.push_back(f);
    }
  }
  for (size_t k = 0; k < files_.size(); ++k)
    if (files_[k].size() >= 8 && files_[k].compare(files_[k].size() - 8, 8, ".en.json") == 0) file_ = k;
  if (!files_.empty())
    load(file_);
  else
    error_ = "no lesson files found (assets/lesson/lesson.*.json next to the program)";
}

void LessonPanel::open_at(int index) {
  *p_open() = true;
  step_ = std::max(0, index);
  shown_step_ = -1;
}

bool LessonPanel::choose_language(const std::string& code) {
  const std::string f = lesson_file(code);
  for (size_t k = 0; k < files_.size(); ++k)
    if (files_[k] == f) {
      load(k);
      return true;
    }
  return false;
}

void LessonPanel::load(size_t file_index) {
  file_ = file_index;
  try {
    lesson_ = load_lesson(files_[file_]);
    error_.clear();
  } catch (const std::exception& e) {
    lesson_ = Lesson();
    error_ = e.what();
  }
}

void LessonPanel::draw_header(FrameContext& ctx) {
  const int n = static_cast<int>(lesson_.steps.size());
  if (ImGui::Button("\xE2\x97\x80 Back") && step_ > 0) --step_;
  ImGui::SameLine();
  if (ImGui::Button("Next \xE2\x96\xB6") && step_ + 1 < n) ++step_;
  ImGui::SameLine();
  ImGui::Text("step %d of %d", step_ + 1, n);
  if (!names_.empty()) {
    ImGui::SameLine();
    ImGui::PushItemWidth(ImGui::GetFontSize() * 6.f);
    if (ImGui::BeginCombo("##lang", names_[file_].c_str())) {
      for (size_t k = 0; k < names_.size(); ++k)
        if (ImGui::Selectable(names_[k].c_str(), k == file_)) load(k);
      ImGui::EndCombo();
    }
    ImGui::PopItemWidth();
  }
  // Row i and key j ≤ i.
  const int T = ctx.trace.T();
  ImGui::PushItemWidth(ImGui::GetFontSize() * 8.f);
  ImGui::SliderInt("row i", &row_, 0, T - 1);
  ImGui::SameLine();
  ImGui::SliderInt("key j", &key_, 0, row_);
  ImGui::PopItemWidth();
  row_ = std::clamp(row_, 0, T - 1);
  key_ = std::clamp(key_, 0, row_);
}

void LessonPanel::draw_content(FrameContext& ctx) {
  AppState& s = ctx.state;
  if (!error_.empty()) {
    ImGui::TextWrapped("%s", error_.c_str());
    return;
  }
  if (lesson_.steps.empty()) return;
  step_ = std::clamp(step_, 0, static_cast<int>(lesson_.steps.size()) - 1);
  const ModelConfig& c = ctx.model->config;
  const int T = ctx.trace.T();
  // The steps explain softmax attention: on a hybrid's linear or convolution layer, their
  // numbers come from the nearest softmax layer (and the head within its range).
  int layer = s.layer;
  if (c.layer(layer).mixer != Mixer::Softmax) {
    int best = -1;
    for (int l = 0; l < c.n_layer; ++l)
      if (c.layer(l).mixer == Mixer::Softmax && (best < 0 || std::abs(l - s.layer) < std::abs(best - s.layer))) best = l;
    if (best >= 0) layer = best;
  }
  const int head = std::min(s.head, c.n_head - 1);
  if (ctx.snap.trace_serial != trace_serial_ || row_ < 0 || row_ >= T) {
    // A new result: the last row, and the key it attends to most in this head.
    trace_serial_ = ctx.snap.trace_serial;
    row_ = T - 1;
    try {
      const RowNumbers n = row_numbers(ctx.trace, c, layer, head, row_, 0);
      key_ = static_cast<int>(std::max_element(n.weights.begin(), n.weights.end()) - n.weights.begin());
    } catch (const Error&) {
      key_ = 0;  // said below, where the numbers are drawn
    }
  }
  draw_header(ctx);
  const LessonStep& step = lesson_.steps[static_cast<size_t>(step_)];
  if (shown_step_ != step_) {  // a new step shows its stage; the tabs stay free to click after
    s.stage = step.stage;
    shown_step_ = step_;
    // The window step on a global layer of a model that has local ones: the first local layer.
    if (step.show == "local_window" && c.layer(s.layer).window == 0)
      for (int l = 0; l < c.n_layer; ++l)
        if (c.layer(l).window > 0) {
          s.layer = l;
          break;
        }
    // The memory step shows the first layer whose memory has a fixed size (its A, when linear).
    if (step.show == "memory")
      for (int l = 0; l < c.n_layer; ++l)
        if (c.layer(l).mixer != Mixer::Softmax) {
          s.layer = l;
          if (c.layer(l).mixer == Mixer::GatedDeltaNet) s.stage = Stage::Implicit;
          break;
        }
  }
  RowNumbers n;
  try {
    n = row_numbers(ctx.trace, c, layer, head, row_, key_);
  } catch (const Error& e) {
    ImGui::TextWrapped("%s", e.what());
    return;
  }
  s.lesson.active = true;
  s.lesson.row = row_;
  s.lesson.col = key_;
  ImGui::Separator();
  if (ctx.fonts.big) ImGui::PushFont(ctx.fonts.big);
  ImGui::TextWrapped("%s", fill_placeholders(step.title, n).c_str());
  if (ctx.fonts.big) ImGui::PopFont();
  ImGui::TextWrapped("%s", fill_placeholders(step.body_for(n.has_sink), n).c_str());
  ImGui::Separator();
  draw_numbers(step, n, ctx);
}

namespace {
// "a, b, c, …" of the first `most` values.
template <class V>
std::string list(const V& v, size_t most) {
  std::string s;
  char b[32];
  for (size_t k = 0; k < v.size() && k < most; ++k) {
    std::snprintf(b, sizeof b, "%s%+.3f", k ? ", " : "", static_cast<double>(v[k]));
    s += b;
  }
  if (v.size() > most) s += ", \xE2\x80\xA6";
  return s;
}
}  // namespace

void LessonPanel::draw_numbers(const LessonStep& step, const RowNumbers& n, FrameContext& ctx) {
  const ImVec4 hi(1.f, 0.85f, 0.3f, 1.f);
  const std::string& k = step.show;
  auto tok = [&](int p) { return chip_label_in_window(ctx.snap.labels, ctx.trace, p, ctx.model); };
  if (k == "qk" || k == "dot") {
    ImGui::Text("q_%d ('%s') = [%s]", n.i, tok(n.i).c_str(), list(n.q_i, 6).c_str());
    ImGui::Text("k_%d ('%s') = [%s]", n.j, tok(n.j).c_str(), list(n.k_j, 6).c_str());
    if (k == "dot") {
      std::string terms;
      char b[64];
      for (int x = 0; x < n.d && x < 3; ++x) {
        std::snprintf(b, sizeof b, "%s(%+.3f)(%+.3f)", x ? " + " : "", n.q_i[static_cast<size_t>(x)],
                      n.k_j[static_cast<size_t>(x)]);
        terms += b;
      }
      ImGui::TextColored(hi, "q\xC2\xB7k = %s + \xE2\x80\xA6 = %.4f", terms.c_str(), n.score);
    }
  } else if (k == "scale") {
    ImGui::TextColored(hi, "%.4f \xC3\xB7 \xE2\x88\x9A%d = %.4f \xC3\xB7 %.4f = %.4f", n.score, n.d, n.score, n.sqrt_d,
                       n.scaled);
  } else if (k == "mask") {
    ImGui::TextWrapped(
        "row %d: keys 0 \xE2\x80\xA6 %d kept, keys %d \xE2\x80\xA6 %d \xE2\x86\x92 \xE2\x88\x92\xE2\x88\x9E (%d "
        "masked)",
        n.i, n.i, n.i + 1, n.T - 1, n.masked_count);
    if (n.outside_count > 0)
      ImGui::TextColored(ImVec4(0.f, 0.9f, 0.67f, 1.f),
                         "layer %d is local (W = %d): keys 0 \xE2\x80\xA6 %d are outside its window \xE2\x86\x92 "
                         "\xE2\x88\x92\xE2\x88\x9E too; it keeps keys %d \xE2\x80\xA6 %d",
                         n.layer, n.window, n.first_key - 1, n.first_key, n.i);
  } else if (k == "exp" || k == "softmax") {
    if (ImGui::BeginTable("row", 4, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
      ImGui::TableSetupColumn("key j");
      ImGui::TableSetupColumn(
          "q\xC2\xB7k/\xE2\x88\x9A"
          "d");
      ImGui::TableSetupColumn("exp(x \xE2\x88\x92 max)");
      ImGui::TableSetupColumn("weight");
      ImGui::TableHeadersRow();
      // The keys in order, up to 8 around the chosen one.
      const int first = std::max(0, std::min(n.j - 3, n.i - 7));
      for (int jj = first; jj <= n.i && jj < first + 8; ++jj) {
        const size_t u = static_cast<size_t>(jj);
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        if (jj == n.j)
          ImGui::TextColored(hi, "%d '%s'", jj, tok(jj).c_str());
        else
          ImGui::Text("%d '%s'", jj, tok(jj).c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%+.4f", n.scaled_row[u]);
        ImGui::TableNextColumn();
        ImGui::Text("%.4f", n.exp_row[u]);
        ImGui::TableNextColumn();
        ImGui::Text("%.4f", n.weights[u]);
      }
      ImGui::EndTable();
    }
    if (n.has_sink)
      ImGui::Text("row max %.4f   \xCE\xA3 exp (sink included) = %.4f   \xCE\xA3 weights = 1 \xE2\x88\x92 %.4f (the sink)",
                  n.row_max, n.row_sum, n.sink_weight);
    else
      ImGui::Text("row max %.4f   \xCE\xA3 exp = %.4f   \xCE\xA3 weights = 1", n.row_max, n.row_sum);
  } else if (k == "sink") {
    // Where row i's weight goes when no key matches: a learned sink (GPT-OSS), else the first key.
    const float w = ImGui::GetContentRegionAvail().x * 0.6f, h = ImGui::GetFontSize();
    auto bar = [&](const char* label, double v, ImU32 col) {
      const ImVec2 p = ImGui::GetCursorScreenPos();
      ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + w * static_cast<float>(std::clamp(v, 0.0, 1.0)), p.y + h), col);
      ImGui::Dummy(ImVec2(w, h));
      ImGui::SameLine();
      ImGui::Text("%s %.4f", label, v);
    };
    if (n.has_sink) bar("learned sink", n.sink_weight, IM_COL32(240, 160, 60, 255));
    bar(("key " + std::to_string(n.first_key) + " '" + tok(n.first_key) + "'").c_str(), n.first_weight, IM_COL32(90, 170, 255, 255));
    bar(n.has_sink ? "all the tokens" : "the other keys", n.has_sink ? 1.0 - n.sink_weight : 1.0 - n.first_weight,
        IM_COL32(150, 150, 150, 255));
  } else if (k == "weighted_v") {
    ImGui::TextColored(hi, "out_%d = [%s]", n.i, list(n.out_i, 6).c_str());
  } else if (k == "gqa") {
    ImGui::TextWrapped("query head %d \xE2\x86\x92 KV head %d = %d \xC3\xB7 %d; heads sharing it: %s", n.head,
                       n.kv_head, n.head, n.group, fill_placeholders("{shared_heads}", n).c_str());
  } else if (k == "window") {
    ImGui::TextWrapped("T = %d of block_size %d, dropped %d", n.T, n.block_size, n.dropped);
  } else if (k == "local_window") {
    const ImVec4 band(0.f, 0.9f, 0.67f, 1.f);
    ImGui::PushTextWrapPos(0.f);
    ImGui::TextColored(ImVec4(0.47f, 0.78f, 1.f, 1.f), "crop (block_size %d): tokens %d \xE2\x80\xA6 %d of the text enter as positions 0 \xE2\x80\xA6 %d",
                       n.block_size, n.dropped, n.dropped + n.T - 1, n.T - 1);
    if (n.window > 0)
      ImGui::TextColored(band, "window (layer %d, W = %d): query %d sees keys %d \xE2\x80\xA6 %d, positions kept; %d older masked",
                         n.layer, n.window, n.i, n.first_key, n.i, n.outside_count);
    else
      ImGui::TextColored(band, "layer %d is global: query %d sees keys 0 \xE2\x80\xA6 %d", n.layer, n.i, n.i);
    const ModelConfig& c = ctx.model->config;
    if (!c.any_local())
      ImGui::TextDisabled("this model has no local layers: open a Gemma, Mistral or Phi-3 model to see a real window");
    else if (n.window == 0) {
      for (int l = 0; l < c.n_layer; ++l)
        if (c.layer(l).window > 0) {
          if (ImGui::SmallButton(("show local layer " + std::to_string(l)).c_str())) ctx.state.layer = l;
          break;
        }
    }
    ImGui::PopTextWrapPos();
  } else if (k == "memory") {
    const ModelConfig& c = ctx.model->config;
    ImGui::PushTextWrapPos(0.f);  // long lines: wrapped in the panel's width
    draw_memory_numbers(n, c);
    ImGui::PopTextWrapPos();
  } else if (k == "kv_cache") {
    ImGui::TextWrapped("2 \xC3\x97 %d \xC3\x97 %d \xC3\x97 %d \xC3\x97 %d = %lld floats", n.kv_layers, n.T, n.n_kv_head,
                       n.d, n.kv_cache_floats);
  }
}

// The memory step's numbers: a softmax layer's growing K and V beside the fixed memory of the
// first linear or convolution layer, and on a linear layer its row of A against a softmax row.
void LessonPanel::draw_memory_numbers(const RowNumbers& n, const ModelConfig& c) {
  if (n.memory_layer < 0) {
    ImGui::TextDisabled("this model has no layer with a fixed-size memory: open a Qwen3.5 or LFM2 model (presets "
                        "qwen3.5-0.8b, lfm2-350m) to compare the two kinds");
    return;
  }
  ImGui::TextColored(ImVec4(0.94f, 0.63f, 0.24f, 1.f), "softmax layer %d: K and V of %d tokens = 2 \xC3\x97 %d \xC3\x97 %d "
                     "\xC3\x97 %d = %lld floats, and growing", n.layer, n.T, n.T, n.n_kv_head, n.d, n.layer_kv_floats);
  if (c.layer(n.memory_layer).mixer == Mixer::GatedDeltaNet) {
    ImGui::TextColored(ImVec4(0.47f, 0.78f, 1.f, 1.f), "linear layer %d: %d memories of %d \xC3\x97 %d + the convolution's "
                       "last %d inputs = %lld floats, at any T", n.memory_layer, c.linear.v_heads, c.linear.k_dim,
                       c.linear.v_dim, c.linear.conv_kernel - 1, n.state_floats);
    ImGui::Text("row %d of its A (value head %d): \xCE\xA3 = %+.4f, smallest %+.4f, %d of %d entries negative", n.i,
                n.head % std::max(1, c.linear.v_heads), n.a_row_sum, n.a_row_min, n.a_negative, n.i + 1);
    ImGui::Text("row %d of softmax layer %d: \xCE\xA3 = 1, smallest %.4f, none negative", n.i, n.layer,
                *std::min_element(n.weights.begin(), n.weights.end()));
  } else {
    ImGui::TextColored(ImVec4(0.47f, 0.78f, 1.f, 1.f), "convolution layer %d: the last %d inputs of %d channels = %lld "
                       "floats, at any T", n.memory_layer, c.short_conv_kernel - 1, c.n_embd, n.state_floats);
  }
}

}  // namespace attnviz::ui
