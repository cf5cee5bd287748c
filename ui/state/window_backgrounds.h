// Which panels fill their own background. The GUI clears every frame with the window
// background colour (app/gui_main.cpp), so a panel that no other window overlaps can leave
// its background to the clear: on a software renderer the blended backgrounds of a
// 1600 × 1000 window are about a quarter of drawing a frame (docs/performance.md). No ImGui;
// unit-tested in tests/test_ui_state.cpp.
#pragma once
#include <vector>

namespace attnviz::ui {

struct WinRect {
  float x = 0, y = 0, w = 0, h = 0;  // screen coordinates; w ≤ 0: not drawn
};

// One flag per panel: true where it must fill its background. A panel fills it when another
// panel or one of `others` (the menu and status bars) overlaps it by more than a border (2
// pixels each way), when it was not drawn last frame (w ≤ 0: where it lands is not known
// yet), and every panel does while `moving` (a window dragged or resized, the layout
// changing: last frame's rectangles are out of date).
std::vector<bool> panels_needing_background(const std::vector<WinRect>& panels, const std::vector<WinRect>& others,
                                            bool moving);

}  // namespace attnviz::ui
