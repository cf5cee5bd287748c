// ui/state/thumb_atlas: every head's thumbnail in one image. Each slot against the trace's
// thumbnail coloured on its own (colorize_rgba, as the heatmap colours probs; a linear
// layer's |A| from 0 to its largest), and while typing: the image after an appended token
// equals one laid out afresh for the new trace, and every texel that changed lies in a band
// the update reported (the rows the head grid uploads).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

#include "core/engine/engine.h"
#include "test_util.h"
#include "ui/state/thumb_atlas.h"
#include "ui/state/window_paint.h"

namespace attnviz::ui {
namespace {

using test::make_model_dir;
using test::random_ids;
using test::small_config;
using test::small_qwen35;

// The slot of (l, h): (n, n, 4).
std::vector<uint8_t> slot_pixels(const ThumbAtlasImage& a, int l, int h) {
  int sx = 0, sy = 0;
  a.slot_origin(l, h, &sx, &sy);
  const int n = a.slot_side();
  std::vector<uint8_t> out(static_cast<size_t>(n) * n * 4);
  for (int y = 0; y < n; ++y)
    std::copy_n(a.rgba().data() + (static_cast<size_t>(sy + y) * a.width() + sx) * 4, n * 4,
                out.data() + static_cast<size_t>(y) * n * 4);
  return out;
}

// What the slot should show: the thumbnail (padded to n with −inf), coloured in one piece.
std::vector<uint8_t> expected_slot(const Trace& tr, int l, int h, int n, Colormap cmap) {
  const LayerTrace& lt = tr.layers[l];
  const int side = static_cast<int>(lt.thumbs.dim(1));
  std::vector<float> v(static_cast<size_t>(n) * n, -std::numeric_limits<float>::infinity());
  for (int y = 0; y < side; ++y)
    for (int x = 0; x < side; ++x) v[static_cast<size_t>(y) * n + x] = lt.thumbs.head(h)[static_cast<size_t>(y) * side + x];
  ValueRange r{0.f, 1.f, true};
  if (lt.mixer == Mixer::GatedDeltaNet) {
    float top = 0.f;
    for (float x : v) top = std::max(top, x);
    r = ValueRange{0.f, top > 0.f ? top : 1.f, true};
  }
  std::vector<uint8_t> rgba;
  colorize_rgba(cmap, v.data(), n, n, r, rgba, /*causal_mask=*/true);
  paint_outside_window(rgba, n, n, lt.window, std::max(lt.thumb_bucket, 1));
  return rgba;
}

void check_slots(const ThumbAtlasImage& a, const Trace& tr, const ModelConfig& c, Colormap cmap, const std::string& what) {
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.heads_at(l); ++h)
      ASSERT_EQ(slot_pixels(a, l, h), expected_slot(tr, l, h, a.slot_side(), cmap))
          << what << ": layer " << l << " head " << h;
}

// Types `extra` tokens after `start` into a model, checking the image after each.
void type_into(const ModelConfig& cfg, const std::string& tag, int start, int extra) {
  const auto model = load_model(make_model_dir(cfg, 21, tag));
  const ModelConfig& c = model->config;
  Engine engine(model, make_cpu_backend());
  const std::vector<int> ids = random_ids(start + extra, c.vocab_size, 5);
  ThumbAtlasImage atlas;
  std::vector<std::pair<int, int>> bands;
  Trace tr = engine.run(std::vector<int>(ids.begin(), ids.begin() + start));
  ASSERT_TRUE(atlas.update(tr, c, Colormap::Viridis, &bands));
  EXPECT_TRUE(bands.empty());
  check_slots(atlas, tr, c, Colormap::Viridis, tag + " at load");
  int incremental = 0;
  for (int T = start + 1; T <= start + extra; ++T) {
    const std::vector<uint8_t> before = atlas.rgba();
    const int w_before = atlas.width(), h_before = atlas.height();
    tr = engine.run(std::vector<int>(ids.begin(), ids.begin() + T));
    const bool laid_out = atlas.update(tr, c, Colormap::Viridis, &bands);
    const std::string what = tag + " T " + std::to_string(T);
    check_slots(atlas, tr, c, Colormap::Viridis, what);
    ThumbAtlasImage fresh;
    fresh.update(tr, c, Colormap::Viridis, nullptr);
    ASSERT_EQ(atlas.rgba(), fresh.rgba()) << what << ": differs from an image laid out afresh";
    if (laid_out) continue;  // a new slot size: uploaded whole
    ++incremental;
    ASSERT_EQ(atlas.width(), w_before);
    ASSERT_EQ(atlas.height(), h_before);
    // Every changed texel row is in a reported band; bands stay inside the image.
    std::vector<bool> in_band(static_cast<size_t>(atlas.height()), false);
    for (auto [y0, y1] : bands) {
      ASSERT_LE(0, y0);
      ASSERT_LT(y0, y1);
      ASSERT_LE(y1, atlas.height());
      for (int y = y0; y < y1; ++y) in_band[static_cast<size_t>(y)] = true;
    }
    const size_t row = static_cast<size_t>(atlas.width()) * 4;
    for (int y = 0; y < atlas.height(); ++y)
      if (!in_band[static_cast<size_t>(y)])
        ASSERT_TRUE(std::equal(before.begin() + y * row, before.begin() + (y + 1) * row, atlas.rgba().begin() + y * row))
            << what << ": texture row " << y << " changed outside the reported bands";
    EXPECT_FALSE(bands.empty()) << what << ": a new token changes each softmax head's last thumbnail row";
  }
  EXPECT_GT(incremental, 0) << tag << ": no keystroke kept the slot size";
}

TEST(ThumbAtlas, SlotsShowEachThumbnailAndTypingUpdatesOnlyTheReportedBands) {
  // Past 64 tokens the thumbnails pool 2 × 2 or more cells and keep their side for a few keys.
  type_into(small_config("llama", 2, 32, 4, 2, 64, 256), "atlas-llama", 130, 6);
}

TEST(ThumbAtlas, HybridSlotsShowAbsoluteAOnItsOwnScale) {
  type_into(small_qwen35(), "atlas-qwen35", 130, 4);
}

}  // namespace
}  // namespace attnviz::ui
