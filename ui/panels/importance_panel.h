// Head importance: an L × H grid, one cell per head, coloured by how much the mean
// next-token loss over the current window rises (red) or falls (blue) when that head alone
// is ablated, zero or mean. Computed in the background (ImportanceJob) with a progress
// bar whenever the window's tokens change, when that costs little (small models); for
// larger ones a button starts it. Click a cell to select the head, right-click to ablate it.
#pragma once
#include "ui/jobs/importance_job.h"
#include "ui/panels/panel.h"

namespace attnviz::ui {

class ImportancePanel : public Panel {
 public:
  ImportancePanel() : Panel("Head importance") {}
  // True when no computation is running (the screenshot waits for it).
  bool idle() const { return job_.idle(); }
  ImVec4 grid_rect() const { return grid_rect_; }

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  void draw_grid(FrameContext& ctx, const ImportanceGrid& g, bool stale);

  ImportanceJob job_;
  int show_mean_ = 0;  // which grid: 0 zero, 1 mean ablation
  bool asked_ = false;  // the button was pressed for the current tokens
  ImVec4 grid_rect_{0, 0, 0, 0};
};

}  // namespace attnviz::ui
