// ui/state/layout_state: the tiled layout's geometry (regions, the heatmap's floor,
// splitters), its tiles, presets and its settings round trip. No ImGui.
#include <gtest/gtest.h>

#include <algorithm>

#include "ui/state/app_state.h"
#include "ui/state/layout_state.h"
#include "ui/state/settings.h"

using namespace attnviz::ui;

namespace {
LayoutInput desktop(float w, float h) {
  LayoutInput in;
  in.width = w, in.height = h, in.top = 26, in.bottom = h - 34, in.gap = 6;
  in.has_left = in.has_right = true;
  in.floor = 0.5f * std::min(w, h);
  in.min_region = 96;
  return in;
}
const LayoutRect& at(const LayoutGeometry& g, Region r) { return g.region[static_cast<int>(r)]; }

// No two rectangles overlap, all lie in [0, w) × [top, bottom).
void expect_tiled(const LayoutGeometry& g, const LayoutInput& in) {
  for (int a = 0; a < kRegionCount; ++a) {
    const LayoutRect& p = g.region[a];
    if (p.empty()) continue;
    EXPECT_GE(p.x, 0.f);
    EXPECT_GE(p.y, in.top);
    EXPECT_LE(p.x + p.w, in.width + 0.5f);
    EXPECT_LE(p.y + p.h, in.bottom + 0.5f);
    for (int b = a + 1; b < kRegionCount; ++b) {
      const LayoutRect& q = g.region[b];
      if (q.empty()) continue;
      const float ox = std::min(p.x + p.w, q.x + q.w) - std::max(p.x, q.x);
      const float oy = std::min(p.y + p.h, q.y + q.h) - std::max(p.y, q.y);
      EXPECT_FALSE(ox > 0.5f && oy > 0.5f)
          << region_name(static_cast<Region>(a)) << " overlaps " << region_name(static_cast<Region>(b));
    }
  }
}
}  // namespace

TEST(LayoutState, RegionsTileTheWindow) {
  for (LayoutPreset p : {LayoutPreset::Explore, LayoutPreset::Research, LayoutPreset::Classroom})
    for (auto [w, h] : {std::pair{1280.f, 720.f}, {1600.f, 1000.f}, {1920.f, 1080.f}}) {
      LayoutInput in = desktop(w, h);
      in.has_bottom = true;
      const LayoutGeometry g = compute_layout(preset_layout(p), in);
      expect_tiled(g, in);
      // The center, the left column and the gaps fill the width; the bottom starts under the center.
      const LayoutRect c = at(g, Region::Center), l = at(g, Region::Left), r = at(g, Region::Right),
                       b = at(g, Region::Bottom);
      EXPECT_NEAR(l.w + in.gap + c.w + in.gap + r.w, w, 0.5f);
      EXPECT_NEAR(b.y, c.y + c.h + in.gap, 0.5f);
      EXPECT_NEAR(b.y + b.h, in.bottom, 0.5f);
    }
}

TEST(LayoutState, CenterKeepsItsFloorUntilTheUserDragsPastIt) {
  LayoutInput in = desktop(1600, 1000);
  in.has_bottom = true;
  LayoutState s = preset_layout(LayoutPreset::Explore);
  s.left = 0.4f, s.right = 0.4f, s.bottom = 0.7f;  // asks for most of the window
  LayoutGeometry g = compute_layout(s, in);
  EXPECT_GE(at(g, Region::Center).w, in.floor - 0.5f);
  EXPECT_GE(at(g, Region::Center).h, in.floor - 0.5f);
  // Dragged by the user: the splitter wins.
  drag_bottom(s, in, in.top + 200.f);
  g = compute_layout(s, in);
  EXPECT_NEAR(at(g, Region::Center).h, 200.f, 1.f);
  EXPECT_TRUE(s.bottom_dragged);
}

TEST(LayoutState, DraggingMovesTheSplitterUnderTheMouse) {
  const LayoutInput in = desktop(1600, 1000);
  LayoutState s = preset_layout(LayoutPreset::Explore);
  drag_left(s, in, 500.f);
  LayoutGeometry g = compute_layout(s, in);
  EXPECT_NEAR(g.splitter_left.x, 500.f, 0.5f);
  EXPECT_NEAR(s.left, 500.f / 1600.f, 1e-6f);
  drag_right(s, in, 1200.f);
  g = compute_layout(s, in);
  EXPECT_NEAR(g.splitter_right.x, 1200.f, 0.5f);
  // Never past the window: each side keeps min_region.
  drag_left(s, in, -50.f);
  EXPECT_NEAR(s.left * 1600.f, in.min_region, 0.5f);
}

TEST(LayoutState, TilesThenTabs) {
  // 600 px tall, 150 px a tile at least: four tiles, the last holds panels 3 and 4 as tabs.
  const std::vector<Tile> t = tile_region({1, 1, 1, 1, 1}, 600.f, 140.f, 6.f);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[3].first, 3);
  EXPECT_EQ(t[3].count, 2);
  float sum = 0.f;
  for (const Tile& x : t) sum += x.extent;
  EXPECT_NEAR(sum + 3 * 6.f, 600.f, 0.5f);
  EXPECT_NEAR(t[1].offset, t[0].extent + 6.f, 0.5f);
  // Weights share the room: 2:1.
  const std::vector<Tile> w = tile_region({2, 1}, 306.f, 50.f, 6.f);
  EXPECT_NEAR(w[0].extent, 200.f, 1.f);
  EXPECT_TRUE(tile_region({}, 100.f, 10.f, 1.f).empty());
  // A limit: two tiles, the second holding panels 1 … 4.
  const std::vector<Tile> lim = tile_region({1, 1, 1, 1, 1}, 600.f, 10.f, 6.f, 2);
  ASSERT_EQ(lim.size(), 2u);
  EXPECT_EQ(lim[1].count, 4);
}

TEST(LayoutState, PresetsPlaceAndOpen) {
  LayoutPreset p;
  EXPECT_TRUE(preset_from_name("Research", &p));
  EXPECT_EQ(p, LayoutPreset::Research);
  EXPECT_FALSE(preset_from_name("docked", &p));
  const LayoutState research = preset_layout(LayoutPreset::Research);
  EXPECT_EQ(region_of(research, "Logit lens"), Region::Right);
  EXPECT_EQ(region_of(preset_layout(LayoutPreset::Explore), "Logit lens"), Region::Bottom);
  EXPECT_EQ(region_of(research, "Attention heatmap"), Region::Center);
  const auto opens = preset_opens(LayoutPreset::Classroom);
  EXPECT_NE(std::find(opens.begin(), opens.end(), "Caption"), opens.end());
  EXPECT_EQ(std::find(opens.begin(), opens.end(), "All heads (softmax)"), opens.end());
  LayoutState moved = research;
  moved.moved["Logit lens"] = Region::Left;
  EXPECT_EQ(region_of(moved, "Logit lens"), Region::Left);
}

TEST(LayoutState, KeptInTheSettings) {
  AppState s;
  s.layout = preset_layout(LayoutPreset::Research);
  s.layout.left = 0.31f;
  s.layout.left_dragged = true;
  s.layout.moved["Logit lens"] = Region::Bottom;
  PanelVisibility vis, vis2;
  AppState t;
  ASSERT_TRUE(settings_from_json(settings_to_json(s, vis), t, vis2));
  EXPECT_EQ(t.layout, s.layout);
  // Out of range or of the wrong type: the defaults stay.
  AppState u;
  ASSERT_TRUE(
      settings_from_json(R"({"layout": {"preset": "nope", "left": 7, "right": "x", "moved": {"A": "up"}}})", u, vis2));
  EXPECT_EQ(u.layout, LayoutState());
}
