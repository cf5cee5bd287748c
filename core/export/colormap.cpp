#include "core/export/colormap.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/engine/trace.h"

namespace attnviz {

namespace {

// Anchor colours, evenly spaced over [0, 1] (anchor i sits at t = i / (N - 1)).
// viridis and magma: ten samples of the published matplotlib maps (van der Walt & Smith);
// diverging: a ColorBrewer-style blue-white-red with nine anchors, white in the middle.
constexpr Rgb8 kViridis[] = {
    {0x44, 0x01, 0x54}, {0x48, 0x28, 0x78}, {0x3e, 0x49, 0x89}, {0x31, 0x68, 0x8e}, {0x26, 0x82, 0x8e},
    {0x1f, 0x9e, 0x89}, {0x35, 0xb7, 0x79}, {0x6e, 0xce, 0x58}, {0xb5, 0xde, 0x2b}, {0xfd, 0xe7, 0x25},
};
constexpr Rgb8 kMagma[] = {
    {0x00, 0x00, 0x04}, {0x18, 0x0f, 0x3d}, {0x44, 0x0f, 0x76}, {0x72, 0x1f, 0x81}, {0x9e, 0x2f, 0x7f},
    {0xcd, 0x40, 0x71}, {0xf1, 0x60, 0x5d}, {0xfd, 0x96, 0x68}, {0xfe, 0xca, 0x8d}, {0xfc, 0xfd, 0xbf},
};
constexpr Rgb8 kDiverging[] = {
    {0x21, 0x66, 0xac}, {0x43, 0x93, 0xc3}, {0x92, 0xc5, 0xde}, {0xd1, 0xe5, 0xf0}, {0xf7, 0xf7, 0xf7},
    {0xfd, 0xdb, 0xc7}, {0xf4, 0xa5, 0x82}, {0xd6, 0x60, 0x4d}, {0xb2, 0x18, 0x2b},
};

template <size_t N>
[[gnu::always_inline]] inline Rgb8 sample(const Rgb8 (&table)[N], float t) {
  if (!(t > 0.f)) return table[0];  // also NaN
  if (t >= 1.f) return table[N - 1];
  const float x = t * static_cast<float>(N - 1);
  const size_t i = std::min(static_cast<size_t>(x), N - 2);
  const float f = x - static_cast<float>(i);
  auto mix = [f](uint8_t a, uint8_t b) {
    // std::lround for v ≥ 0 (halves away from zero), without the library call: v − ⌊v⌋ is
    // exact in float. Colouring a heatmap calls this for every cell.
    const float v = static_cast<float>(a) + f * (static_cast<float>(b) - static_cast<float>(a));
    const int w = static_cast<int>(v);
    return static_cast<uint8_t>(w + (v - static_cast<float>(w) >= 0.5f ? 1 : 0));
  };
  const Rgb8& a = table[i];
  const Rgb8& b = table[i + 1];
  return {mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b)};
}

float srgb_to_linear(uint8_t v) {
  const float c = static_cast<float>(v) / 255.f;
  return c <= 0.04045f ? c / 12.92f : std::pow((c + 0.055f) / 1.055f, 2.4f);
}

}  // namespace

const char* colormap_name(Colormap c) {
  switch (c) {
    case Colormap::Viridis: return "viridis";
    case Colormap::Magma: return "magma";
    case Colormap::Diverging: return "diverging";
  }
  return "viridis";
}

bool colormap_is_signed(Colormap c) { return c == Colormap::Diverging; }

Rgb8 colormap_rgb(Colormap c, float t) {
  switch (c) {
    case Colormap::Viridis: return sample(kViridis, t);
    case Colormap::Magma: return sample(kMagma, t);
    case Colormap::Diverging: return sample(kDiverging, t);
  }
  return sample(kViridis, t);
}

Rgb8 masked_rgb() { return {0x80, 0x80, 0x80}; }

float cie_lightness(Rgb8 c) {
  // Relative luminance Y (D65, Rec. 709 primaries), then L*.
  const float y = 0.2126f * srgb_to_linear(c.r) + 0.7152f * srgb_to_linear(c.g) + 0.0722f * srgb_to_linear(c.b);
  const float f = y > 216.f / 24389.f ? std::cbrt(y) : (24389.f / 27.f * y + 16.f) / 116.f;
  return 116.f * f - 16.f;
}

ValueRange finite_range(const float* data, int64_t n) {
  ValueRange r;
  r.lo = std::numeric_limits<float>::infinity();
  r.hi = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    const float v = data[i];
    if (!std::isfinite(v)) continue;
    r.lo = std::min(r.lo, v);
    r.hi = std::max(r.hi, v);
    r.any = true;
  }
  if (!r.any) r.lo = 0.f, r.hi = 1.f;
  return r;
}

ValueRange symmetric_range(const float* data, int64_t n) {
  const ValueRange f = finite_range(data, n);
  ValueRange r;
  r.any = f.any;
  const float m = f.any ? std::max(std::fabs(f.lo), std::fabs(f.hi)) : 1.f;
  r.lo = -m;
  r.hi = m;
  return r;
}

float normalize_value(float value, ValueRange r) {
  const float span = r.hi - r.lo;
  if (!(span > 0.f)) return 0.5f;
  return std::clamp((value - r.lo) / span, 0.f, 1.f);
}

Rgb8 value_rgb(Colormap c, float value, ValueRange r) {
  if (std::isinf(value) && value < 0.f) return masked_rgb();
  return colormap_rgb(c, normalize_value(value, r));
}

void colorize_rgba(Colormap c, const float* data, int rows, int cols, ValueRange r, std::vector<uint8_t>& rgba,
                   bool causal_mask) {
  rgba.resize(static_cast<size_t>(rows) * static_cast<size_t>(cols) * 4);
  colorize_rows(c, data, 0, rows, cols, r, rgba.data(), causal_mask);
}

namespace {
// colorize_rows for one colormap's table: value_rgb inlined, cell by cell the same colours.
template <size_t N>
void colorize_with(const Rgb8 (&table)[N], const float* data, int row0, int rows, int cols, ValueRange r, uint8_t* out,
                   bool causal_mask) {
  const Rgb8 masked = masked_rgb();
  for (int y = row0; y < row0 + rows; ++y)  // row by row: no division per cell to find its row and column
    for (int x = 0; x < cols; ++x, ++data, out += 4) {
      const float v = *data;
      const bool m = (causal_mask && causally_masked(y, x)) || (std::isinf(v) && v < 0.f);
      const Rgb8 p = m ? masked : sample(table, normalize_value(v, r));
      out[0] = p.r;
      out[1] = p.g;
      out[2] = p.b;
      out[3] = 255;
    }
}
}  // namespace

void colorize_rows(Colormap c, const float* data, int row0, int rows, int cols, ValueRange r, uint8_t* out,
                   bool causal_mask) {
  switch (c) {
    case Colormap::Magma: return colorize_with(kMagma, data, row0, rows, cols, r, out, causal_mask);
    case Colormap::Diverging: return colorize_with(kDiverging, data, row0, rows, cols, r, out, causal_mask);
    case Colormap::Viridis: break;
  }
  colorize_with(kViridis, data, row0, rows, cols, r, out, causal_mask);
}

}  // namespace attnviz
