// core/colormap: endpoints, monotonic lightness, the diverging map's centre, the masked
// colour's distance from every colormap colour, and colorize_rgba's masking.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>
#include <limits>

#include "core/export/colormap.h"

using namespace attnviz;

namespace {
float dist(Rgb8 a, Rgb8 b) {
  const float dr = float(a.r) - float(b.r), dg = float(a.g) - float(b.g), db = float(a.b) - float(b.b);
  return std::sqrt(dr * dr + dg * dg + db * db);
}
constexpr float kInf = std::numeric_limits<float>::infinity();
}  // namespace

TEST(Colormap, ViridisEndpoints) {
  // matplotlib's viridis runs from #440154 (dark purple) to #fde725 (yellow).
  EXPECT_EQ(colormap_rgb(Colormap::Viridis, 0.f), (Rgb8{0x44, 0x01, 0x54}));
  EXPECT_EQ(colormap_rgb(Colormap::Viridis, 1.f), (Rgb8{0xfd, 0xe7, 0x25}));
  EXPECT_EQ(colormap_rgb(Colormap::Viridis, -3.f), colormap_rgb(Colormap::Viridis, 0.f));  // clamped
  EXPECT_EQ(colormap_rgb(Colormap::Viridis, 7.f), colormap_rgb(Colormap::Viridis, 1.f));
  EXPECT_EQ(colormap_rgb(Colormap::Viridis, std::nanf("")), colormap_rgb(Colormap::Viridis, 0.f));
}

TEST(Colormap, MagmaEndpoints) {
  EXPECT_EQ(colormap_rgb(Colormap::Magma, 0.f), (Rgb8{0x00, 0x00, 0x04}));
  EXPECT_EQ(colormap_rgb(Colormap::Magma, 1.f), (Rgb8{0xfc, 0xfd, 0xbf}));
}

TEST(Colormap, SequentialLightnessIsMonotonic) {
  for (Colormap c : {Colormap::Viridis, Colormap::Magma}) {
    float prev = -1.f;
    for (int i = 0; i <= 256; ++i) {
      const float l = cie_lightness(colormap_rgb(c, float(i) / 256.f));
      EXPECT_GT(l, prev - 0.25f) << colormap_name(c) << " at " << i << "/256";  // rounding to 8 bits
      prev = std::max(prev, l);
    }
    EXPECT_GT(cie_lightness(colormap_rgb(c, 1.f)) - cie_lightness(colormap_rgb(c, 0.f)), 60.f) << colormap_name(c);
  }
}

TEST(Colormap, DivergingIsBlueWhiteRed) {
  const Rgb8 lo = colormap_rgb(Colormap::Diverging, 0.f), mid = colormap_rgb(Colormap::Diverging, 0.5f),
             hi = colormap_rgb(Colormap::Diverging, 1.f);
  EXPECT_GT(lo.b, lo.r + 60);  // blue end
  EXPECT_GT(hi.r, hi.b + 60);  // red end
  EXPECT_GT(std::min({mid.r, mid.g, mid.b}), 235);  // near white at the centre
  EXPECT_TRUE(colormap_is_signed(Colormap::Diverging));
  EXPECT_FALSE(colormap_is_signed(Colormap::Viridis));
  // Lightness rises towards the centre from both ends.
  for (int i = 0; i < 128; ++i) {
    EXPECT_LE(cie_lightness(colormap_rgb(Colormap::Diverging, i / 256.f)),
              cie_lightness(colormap_rgb(Colormap::Diverging, (i + 1) / 256.f)) + 0.25f);
    EXPECT_GE(cie_lightness(colormap_rgb(Colormap::Diverging, 0.5f + i / 256.f)) + 0.25f,
              cie_lightness(colormap_rgb(Colormap::Diverging, 0.5f + (i + 1) / 256.f)));
  }
}

TEST(Colormap, MaskedColourIsDistinct) {
  const Rgb8 m = masked_rgb();
  for (int k = 0; k < kColormapCount; ++k)
    for (int i = 0; i <= 256; ++i)
      EXPECT_GT(dist(m, colormap_rgb(static_cast<Colormap>(k), i / 256.f)), 40.f)
          << colormap_name(static_cast<Colormap>(k)) << " at " << i << "/256";
  // −inf is masked whatever the range; small weights are not.
  EXPECT_EQ(value_rgb(Colormap::Viridis, -kInf, {0.f, 1.f, true}), m);
  EXPECT_NE(value_rgb(Colormap::Viridis, 0.f, {0.f, 1.f, true}), m);
  EXPECT_NE(value_rgb(Colormap::Viridis, 1e-6f, {0.f, 1.f, true}), m);
}

TEST(Colormap, Ranges) {
  const float v[] = {-kInf, -2.f, 0.5f, 3.f, std::nanf(""), kInf};
  const ValueRange f = finite_range(v, 6);
  EXPECT_TRUE(f.any);
  EXPECT_FLOAT_EQ(f.lo, -2.f);
  EXPECT_FLOAT_EQ(f.hi, 3.f);
  const ValueRange s = symmetric_range(v, 6);
  EXPECT_FLOAT_EQ(s.lo, -3.f);
  EXPECT_FLOAT_EQ(s.hi, 3.f);
  EXPECT_FLOAT_EQ(normalize_value(0.f, s), 0.5f);  // zero sits at the diverging map's white
  EXPECT_FLOAT_EQ(normalize_value(3.f, s), 1.f);
  EXPECT_FLOAT_EQ(normalize_value(-9.f, s), 0.f);
  const float none[] = {-kInf, -kInf};
  EXPECT_FALSE(finite_range(none, 2).any);
}

TEST(Colormap, ColorizeWithMask) {
  // (2, 2) softmax: row 0 = [1, 0 (masked)], row 1 = [0.25, 0.75]
  const float probs[] = {1.f, 0.f, 0.25f, 0.75f};
  std::vector<uint8_t> rgba;
  colorize_rgba(Colormap::Viridis, probs, 2, 2, {0.f, 1.f, true}, rgba, /*causal_mask=*/true);
  ASSERT_EQ(rgba.size(), 16u);
  auto px = [&](int i) { return Rgb8{rgba[size_t(i) * 4], rgba[size_t(i) * 4 + 1], rgba[size_t(i) * 4 + 2]}; };
  EXPECT_EQ(px(0), colormap_rgb(Colormap::Viridis, 1.f));
  EXPECT_EQ(px(1), masked_rgb());  // masked, not the colour of weight 0
  EXPECT_EQ(px(2), colormap_rgb(Colormap::Viridis, 0.25f));
  EXPECT_EQ(rgba[3], 255);
  colorize_rgba(Colormap::Viridis, probs, 2, 2, {0.f, 1.f, true}, rgba);  // no mask: 0 is dark purple
  EXPECT_EQ(px(1), colormap_rgb(Colormap::Viridis, 0.f));
}

// colorize_rows (one loop per colormap, the colour inlined) against value_rgb cell by cell:
// every colormap, a range that clips, NaN, ±inf, and the causal mask from row row0 on.
TEST(Colormap, ColorizeRowsIsValueRgbCellByCell) {
  const int rows = 7, cols = 23, row0 = 5;
  std::vector<float> data(static_cast<size_t>(rows) * cols);
  uint32_t seed = 12345;
  for (float& v : data) {
    seed = seed * 1664525u + 1013904223u;
    v = static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) * 1.6f - 0.3f;  // [−0.3, 1.3): some clip
  }
  data[3] = std::nanf("");
  data[40] = -INFINITY;
  data[41] = INFINITY;
  for (Colormap c : {Colormap::Viridis, Colormap::Magma, Colormap::Diverging})
    for (bool mask : {false, true}) {
      std::vector<uint8_t> out(data.size() * 4, 7);
      const ValueRange r{-0.1f, 1.1f, true};
      colorize_rows(c, data.data(), row0, rows, cols, r, out.data(), mask);
      for (int y = 0; y < rows; ++y)
        for (int x = 0; x < cols; ++x) {
          const size_t i = static_cast<size_t>(y) * cols + x;
          const Rgb8 want = mask && x > row0 + y ? masked_rgb() : value_rgb(c, data[i], r);
          ASSERT_EQ((Rgb8{out[i * 4], out[i * 4 + 1], out[i * 4 + 2]}), want)
              << colormap_name(c) << " mask " << mask << " cell " << y << "," << x << " value " << data[i];
          ASSERT_EQ(out[i * 4 + 3], 255);
        }
    }
}

TEST(Colormap, BetweenAnchorsIsTheRoundedLinearMix) {
  // Between anchors i and i + 1 (at t = i / (N − 1)) each channel is a + f·(b − a) rounded
  // to nearest, halves up, as std::lround does; the anchors are read back at their own t.
  for (Colormap c : {Colormap::Viridis, Colormap::Magma, Colormap::Diverging}) {
    const int N = c == Colormap::Diverging ? 9 : 10;
    std::vector<Rgb8> anchor;
    for (int i = 0; i < N; ++i) anchor.push_back(colormap_rgb(c, static_cast<float>(i) / static_cast<float>(N - 1)));
    int halves = 0;
    for (int k = 1; k < 200000; ++k) {
      const float t = static_cast<float>(k) / 200000.f;
      const float x = t * static_cast<float>(N - 1);
      const int i = std::min(static_cast<int>(x), N - 2);
      const float f = x - static_cast<float>(i);
      auto want = [&](uint8_t a, uint8_t b) {
        const float v = float(a) + f * (float(b) - float(a));
        halves += v - std::floor(v) == 0.5f;
        return static_cast<uint8_t>(std::lround(v));
      };
      const Rgb8 a = anchor[static_cast<size_t>(i)], b = anchor[static_cast<size_t>(i + 1)];
      const Rgb8 got = colormap_rgb(c, t);
      ASSERT_EQ(got, (Rgb8{want(a.r, b.r), want(a.g, b.g), want(a.b, b.b)})) << colormap_name(c) << " t=" << t;
    }
    EXPECT_GT(halves, 0) << "the sweep should meet exact halves";
  }
}
