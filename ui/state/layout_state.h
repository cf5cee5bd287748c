// The tiled layout's state and geometry: which region of the window each panel lives in,
// the splitters' positions, the three presets, and the rectangles that follow from them.
// No ImGui (ui/layout.h draws it); unit-tested in tests/test_ui_state.cpp.
//
//   +-----------------------------------------------+  menu bar
//   |        |                          |           |
//   |  Left  |          Center          |   Right   |
//   |        |        (the heatmap)     |           |
//   |        |--------------------------+-----------|
//   |        |             Bottom                   |
//   +-----------------------------------------------+  status bar
//
// Left and Right tile their panels top to bottom, Bottom left to right; panels past what a
// region holds side by side become tabs of its last tile.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace attnviz::ui {

enum class Region { Left, Center, Right, Bottom };
constexpr int kRegionCount = 4;
const char* region_name(Region r);
bool region_from_name(const std::string& name, Region* r);

enum class LayoutPreset { Explore, Research, Classroom };
const char* preset_name(LayoutPreset p);  // "explore", "research", "classroom"
// Case-insensitive; false (and *p unchanged) for an unknown name.
bool preset_from_name(const std::string& name, LayoutPreset* p);

struct LayoutRect {
  float x = 0, y = 0, w = 0, h = 0;
  bool empty() const { return w <= 0.f || h <= 0.f; }
};

// What the user (or the preset) chose. Fractions are of the window's width (left, right)
// or of the height under the menu bar (bottom); `*_dragged` marks a splitter the user moved,
// which the heatmap's floor then no longer overrides.
struct LayoutState {
  LayoutPreset preset = LayoutPreset::Explore;
  float left = 0.22f, right = 0.22f, bottom = 0.32f;
  bool left_dragged = false, right_dragged = false, bottom_dragged = false;
  // Panels the user moved to another region than the preset's, by panel title.
  std::map<std::string, Region> moved;
  bool operator==(const LayoutState& o) const;
  bool operator!=(const LayoutState& o) const { return !(*this == o); }
};

// The preset's fractions, no panel moved.
LayoutState preset_layout(LayoutPreset p);
// The region a panel lives in: the user's move, else the preset's place for its title.
Region region_of(const LayoutState& s, const std::string& title);
// The panels a preset opens (titles); the others it closes. Explore: none forced.
std::vector<std::string> preset_opens(LayoutPreset p);
// The panels a preset shows at all (Classroom: the heatmap, caption, lesson and text box);
// empty: every panel may be opened.
std::vector<std::string> preset_allows(LayoutPreset p);

// The geometry's inputs, in pixels.
struct LayoutInput {
  float width = 0, height = 0;                                 // the display
  float top = 0;                                               // below the menu bar
  float bottom = 0;                                            // above the status bar (the status bar's top)
  float gap = 6;                                               // a splitter's thickness between regions
  bool has_left = true, has_right = true, has_bottom = false;  // regions with a panel open
  // The heatmap's floor: the center keeps at least this much width and height (half the
  // window's shorter side) unless a splitter the user dragged gives it less.
  float floor = 0;
  float min_region = 80;  // the least a side region keeps
};

struct LayoutGeometry {
  LayoutRect region[kRegionCount];                            // by Region; empty when the region holds nothing
  LayoutRect splitter_left, splitter_right, splitter_bottom;  // empty when absent
};

LayoutGeometry compute_layout(const LayoutState& s, const LayoutInput& in);

// A splitter dragged to pixel coordinate `pos` (x for left/right, y for bottom): the new
// fraction, clamped so that every region keeps in.min_region; marks it dragged.
void drag_left(LayoutState& s, const LayoutInput& in, float x);
void drag_right(LayoutState& s, const LayoutInput& in, float x);
void drag_bottom(LayoutState& s, const LayoutInput& in, float y);

// How a region's panels (n of them, in order, each with a weight) share its extent along
// its axis: at most extent / min_tile tiles; the first tiles hold one panel each, the last
// the rest as tabs. Returns each tile's [begin, end) panel indices and its extent.
struct Tile {
  int first = 0, count = 0;  // panels first … first + count − 1
  float offset = 0, extent = 0;
};
// At most `max_tiles` tiles (0: no limit).
std::vector<Tile> tile_region(const std::vector<float>& weights, float extent, float min_tile, float gap,
                              int max_tiles = 0);

}  // namespace attnviz::ui
