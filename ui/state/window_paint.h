// A local layer's hidden keys in an RGBA image of attention weights, without ImGui or GL:
// shared by the panels (ui/draw/imgui_util.h includes it) and the thumbnail atlas.
#pragma once
#include <cstdint>
#include <vector>

#include "core/export/colormap.h"

namespace attnviz::ui {

// A local layer's attention window, drawn the same way in every panel: the cells its
// window hides (j ≤ i but before i − W + 1) in kOutsideWindowRgb, apart from the causal
// grey, and the band it sees framed in window_color().
constexpr Rgb8 kOutsideWindowRgb{120, 96, 64};
// Paints the cells outside the window of a (rows × cols) RGBA image of a (T, T) matrix, or
// of its max-pooled thumbnail whose cells are bucket × bucket blocks: a cell is painted when
// its whole block is outside.
void paint_outside_window(std::vector<uint8_t>& rgba, int rows, int cols, int window, int bucket = 1);
// The same for rows [row0, row0 + rows) of such an image: rgba points at row row0's first
// texel, and rows are `stride` texels apart.
void paint_outside_window_rows(uint8_t* rgba, int row0, int rows, int cols, int window, int bucket, int64_t stride);

}  // namespace attnviz::ui
