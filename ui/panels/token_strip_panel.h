// The typed text as token chips: the block_size window drawn as a bracket over the tokens
// that enter the model, tokens that fell out of the window greyed (with their count), a
// block_size slider (1 … model context, or less where the machine's memory could not hold
// the trace of a longer window: then it says so). Hovering a chip highlights that token's row and
// column in every heatmap. A model with local layers gets a second bracket over the chips:
// the keys the hovered query sees on the selected layer (its window, apart from the crop).
// A hybrid's linear-attention layer selected: β and the decay of each token under them.
#pragma once
#include "core/engine/engine.h"
#include "ui/panels/panel.h"

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
  void draw_seen(const FrameContext& ctx, float y) const;
  void draw_memory_writes(const FrameContext& ctx, float y, float height) const;
  // The memory cap on block_size, looked at again when the model or the backend changes
  // and at most once a second otherwise (it reads /proc/meminfo).
  const WindowLimit& window_limit(const FrameContext& ctx);

  WindowLimit limit_;
  double limit_available_ = 0;  // bytes the cap was computed for
  const Model* limit_model_ = nullptr;
  std::string limit_backend_;
  double limit_at_s_ = -1e9;

  std::vector<ImVec2> chip_x_;  // (T) left and right x of each in-window chip, this frame
  uint64_t follow_serial_ = 0;  // scroll to the newest token once per new trace
  ImVec4 strip_rect_{0, 0, 0, 0};
};

}  // namespace attnviz::ui
