#include "ui/state/window_backgrounds.h"

#include <algorithm>

namespace attnviz::ui {

namespace {
bool overlap(const WinRect& a, const WinRect& b) {
  if (a.w <= 0.f || b.w <= 0.f) return false;
  const float w = std::min(a.x + a.w, b.x + b.w) - std::max(a.x, b.x);
  const float h = std::min(a.y + a.h, b.y + b.h) - std::max(a.y, b.y);
  return w > 2.f && h > 2.f;
}
}  // namespace

std::vector<bool> panels_needing_background(const std::vector<WinRect>& panels, const std::vector<WinRect>& others,
                                            bool moving) {
  std::vector<bool> out(panels.size(), moving);
  for (size_t i = 0; i < panels.size() && !moving; ++i) {
    bool needed = panels[i].w <= 0.f;
    for (size_t j = 0; j < panels.size() && !needed; ++j) needed = j != i && overlap(panels[i], panels[j]);
    for (size_t j = 0; j < others.size() && !needed; ++j) needed = overlap(panels[i], others[j]);
    out[i] = needed;
  }
  return out;
}

}  // namespace attnviz::ui
