// Perceptual colormaps as tables: value in [0, 1] → sRGB, shared by the GUI heatmaps and
// the image exporters. Pure functions, no ImGui, no GL.
//
//   viridis   sequential, lightness rises monotonically: softmax weights (probs)
//   magma     sequential, black → pale yellow: an alternative for probs
//   diverging blue → white → red for signed values (scores, Q, K, V, head outputs),
//             white at 0.5, i.e. at value 0 when the range is symmetric
//   masked    one grey no colormap reaches: the −inf cells of the masked scores
//
// Each table is a set of evenly spaced anchor colours sampled from the published maps,
// linearly interpolated in sRGB between anchors.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attnviz {

struct Rgb8 {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb8& o) const { return r == o.r && g == o.g && b == o.b; }
  bool operator!=(const Rgb8& o) const { return !(*this == o); }
};

enum class Colormap { Viridis, Magma, Diverging };
constexpr int kColormapCount = 3;
const char* colormap_name(Colormap c);  // "viridis", "magma", "diverging"
bool colormap_is_signed(Colormap c);    // true for the diverging map

// t in [0, 1] (clamped; NaN maps like 0) → colour.
Rgb8 colormap_rgb(Colormap c, float t);

// The colour of masked (−inf) cells: a mid grey, far from every colormap colour.
Rgb8 masked_rgb();

// CIE L* (0 … 100) of an sRGB colour, D65: for tests of monotonic lightness.
float cie_lightness(Rgb8 c);

// Value range for colouring. Non-finite values (−inf masked cells, NaN) are skipped.
struct ValueRange {
  float lo = 0.f, hi = 1.f;
  bool any = false;  // false when there was no finite value
};
// Min and max of the finite values of data[0 … n).
ValueRange finite_range(const float* data, int64_t n);
// [−m, m] with m the largest |finite value| (so 0 sits at the diverging map's white).
ValueRange symmetric_range(const float* data, int64_t n);

// Maps `value` in range r to t in [0, 1].
float normalize_value(float value, ValueRange r);

// value → colour: −inf → masked_rgb(), other values through the colormap over r.
Rgb8 value_rgb(Colormap c, float value, ValueRange r);

// Colours a row-major (rows, cols) matrix into RGBA8 (rows * cols * 4 bytes, alpha 255),
// row 0 first: one texel per cell, ready for a texture or an image writer. −inf cells get
// masked_rgb(), and with `causal_mask` so do the cells above the diagonal (j > i): the
// softmax weights there are exactly 0, and this keeps them apart from small real weights.
void colorize_rgba(Colormap c, const float* data, int rows, int cols, ValueRange r, std::vector<uint8_t>& rgba,
                   bool causal_mask = false);
// Rows [row0, row0 + rows) of such a matrix: data and out point at row row0's first cell
// and first texel (the causal mask needs the rows' own indices).
void colorize_rows(Colormap c, const float* data, int row0, int rows, int cols, ValueRange r, uint8_t* out,
                   bool causal_mask);

}  // namespace attnviz
