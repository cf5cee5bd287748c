#include "ui/state/window_paint.h"

#include <algorithm>

#include "core/engine/mask.h"

namespace attnviz::ui {

void paint_outside_window_rows(uint8_t* rgba, int row0, int rows, int cols, int window, int bucket, int64_t stride) {
  if (window <= 0 || bucket < 1) return;
  // Block (i, j) holds queries from i·b and keys up to (j + 1)·b − 1: all hidden when that
  // key comes before the window of query i·b, which starts at F: j < F / b.
  for (int r = 0; r < rows; ++r) {
    const int i = row0 + r;
    for (int j = 0; j < std::min(cols, window_first(i * bucket, window) / bucket); ++j) {
      uint8_t* p = rgba + (static_cast<size_t>(r) * static_cast<size_t>(stride) + static_cast<size_t>(j)) * 4;
      p[0] = kOutsideWindowRgb.r, p[1] = kOutsideWindowRgb.g, p[2] = kOutsideWindowRgb.b;
    }
  }
}

void paint_outside_window(std::vector<uint8_t>& rgba, int rows, int cols, int window, int bucket) {
  paint_outside_window_rows(rgba.data(), 0, rows, cols, window, bucket, cols);
}

}  // namespace attnviz::ui
