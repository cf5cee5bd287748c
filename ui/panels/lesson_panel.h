// The guided lesson (Help → Guided lesson, F3): Back / Next through the steps of a lesson
// file (ui/lesson.h) on the current text, layer and head. Each step switches the heatmap to
// its stage, outlines row i and cell (i, j) there (AppState::lesson), and shows the numbers
// of that row computed from the trace: q_i and k_j, q·k, ÷√d, the mask, exp and the row sum,
// the softmax weights, Σ p·v, then GQA, block_size and the KV cache. English and Chinese
// ship; the language picker lists every assets/lesson/lesson.*.json.
#pragma once
#include <string>
#include <vector>

#include "ui/state/lesson.h"
#include "ui/panels/panel.h"

namespace attnviz::ui {

class LessonPanel : public Panel {
 public:
  LessonPanel();
  // Opens the lesson at step `index` (0-based; clamped once a lesson is loaded).
  void open_at(int index);
  // Picks the lesson file for a language code ("en", "zh"); false when there is none.
  bool choose_language(const std::string& code);
  // Every character of every lesson file's titles and bodies, for the font atlas.
  const std::string& text_for_fonts() const { return font_text_; }

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  void load(size_t file_index);
  void draw_header(FrameContext& ctx);
  void draw_numbers(const LessonStep& step, const RowNumbers& n, FrameContext& ctx);
  void draw_memory_numbers(const RowNumbers& n, const ModelConfig& c);

  std::vector<std::string> files_;  // lesson.*.json found
  std::vector<std::string> names_;  // their languages
  size_t file_ = 0;
  Lesson lesson_;
  std::string error_;      // why the lesson file could not be read
  std::string font_text_;  // see text_for_fonts()
  int step_ = 0;
  int shown_step_ = -1;        // the step whose stage was last applied to the heatmap
  int row_ = -1, key_ = -1;    // −1: the last row, and the key it attends to most
  uint64_t trace_serial_ = 0;  // a new result resets row and key to their defaults
};

}  // namespace attnviz::ui
