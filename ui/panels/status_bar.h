// The bottom line: forward time, frame time, T, dropped, backend, model. Not a Panel: it
// cannot be closed, moved or hidden, so it is in neither the View menu nor the saved
// panel visibility, and the layout puts it along the window's bottom edge every frame.
#pragma once
#include "ui/panels/panel.h"

namespace attnviz::ui {

// Draws the bar as a window without decoration at `pos` (screen coordinates) of `size`.
void draw_status_bar(FrameContext& ctx, ImVec2 pos, ImVec2 size);

}  // namespace attnviz::ui
