// The model in use: its config, parameter counts per part, and head_size = n_embd / n_head.
#pragma once
#include "ui/panel.h"

namespace attnviz::ui {

class ModelPanel : public Panel {
 public:
  ModelPanel() : Panel("Model") {}

 protected:
  void draw_content(FrameContext& ctx) override;
  bool needs_trace() const override { return false; }
};

}  // namespace attnviz::ui
