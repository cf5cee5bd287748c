// The bottom line: forward time, frame time, T, dropped, backend, model.
#pragma once
#include "ui/panel.h"

namespace attnviz::ui {

class StatusBar : public Panel {
 public:
  StatusBar() : Panel("##status") {}

 protected:
  void draw_content(FrameContext& ctx) override;
  bool needs_trace() const override { return false; }
  ImGuiWindowFlags window_flags() const override {
    return ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
           ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoFocusOnAppearing;
  }
};

}  // namespace attnviz::ui
