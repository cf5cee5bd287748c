// Text and model: the text box (every keystroke re-tokenizes; the worker recomputes
// through the KV cache), the model (built-in, the generated random model, or a directory),
// the backend (cpu / gpu, with the reason when the GPU fell back), and errors.
#pragma once
#include <string>
#include <vector>

#include "ui/panels/panel.h"

namespace attnviz::ui {

class TextPanel : public Panel {
 public:
  // `random_model_dir`: where the generated random model lives ("" if none).
  explicit TextPanel(std::string random_model_dir);
  void focus_text() { focus_ = true; }

 protected:
  void draw_content(FrameContext& ctx) override;
  bool needs_trace() const override { return false; }

 private:
  std::string random_dir_;
  std::vector<std::string> builtins_;  // names found at start (refresh button)
  std::string path_;                   // the directory field
  bool focus_ = true;
};

}  // namespace attnviz::ui
