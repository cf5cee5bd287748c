// What the heatmap shows, in words large enough for a room: the layer, head and stage (the
// caption), the layer and head fields, the stage tabs and what the stage means. The
// Classroom layout puts it beside the heatmap, which then draws the matrix alone.
#pragma once
#include "ui/panels/heatmap_panel.h"
#include "ui/panels/panel.h"

namespace attnviz::ui {

class CaptionPanel : public Panel {
 public:
  explicit CaptionPanel(HeatmapPanel& heatmap) : Panel("Caption", /*open=*/false), heatmap_(heatmap) {}

 protected:
  void draw_content(FrameContext& ctx) override { heatmap_.draw_caption(ctx); }

 private:
  HeatmapPanel& heatmap_;
};

}  // namespace attnviz::ui
