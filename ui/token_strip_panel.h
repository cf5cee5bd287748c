// The typed text as token chips: the block_size window drawn as a bracket over the tokens
// that enter the model, tokens that fell out of the window greyed (with their count), a
// block_size slider (1 … model context). Hovering a chip highlights that token's row and
// column in every heatmap.
#pragma once
#include "ui/panel.h"

namespace attnviz::ui {

class TokenStripPanel : public Panel {
 public:
  TokenStripPanel() : Panel("Tokens & context window") {}
  ImVec4 strip_rect() const { return strip_rect_; }  // (x, y, w, h) of the chips drawn last frame

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  struct ChipsDrawn {
    float end_x;           // right end of the last chip (+ gap)
    float win_x0, win_x1;  // horizontal extent of the in-window chips; −1 when none
  };
  void draw_controls(FrameContext& ctx, const WindowInfo& w);
  ChipsDrawn draw_chips(FrameContext& ctx, const WindowInfo& w, ImVec2 origin, float chip_h);
  void draw_bracket(const FrameContext& ctx, const ChipsDrawn& chips, float y) const;

  uint64_t follow_serial_ = 0;  // scroll to the newest token once per new trace
  ImVec4 strip_rect_{0, 0, 0, 0};
};

}  // namespace attnviz::ui
