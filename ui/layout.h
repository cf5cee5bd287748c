// The tiled layout: owns where every panel is drawn. The window (between the menu bar and
// the status bar) is split into regions (ui/state/layout_state.h: left, center, right,
// bottom) by splitters the mouse drags; each open panel lives in one region, a region
// tiles its panels and turns those past what fits into tabs; no panel covers another.
// The center holds the heatmap and keeps a floor (half the window's shorter side) unless
// the user drags a splitter into it. A tab's context menu moves its panel to another region.
#pragma once
#include <imgui.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ui/panels/panel.h"
#include "ui/state/layout_state.h"

namespace attnviz::ui {

class Layout {
 public:
  // Every panel the layout places, in their drawing order within a region.
  void set_panels(std::vector<Panel*> panels) { panels_ = std::move(panels); }
  LayoutState& state() { return state_; }
  const LayoutState& state() const { return state_; }
  // The preset's arrangement: its fractions, no panel moved, its panels open and the others
  // closed (`keep_open` stays as it is: a dialog).
  void apply_preset(LayoutPreset p, const Panel* keep_open = nullptr);
  // The current preset's fractions and places, the panels left open or closed.
  void reset() { state_ = preset_layout(state_.preset); }

  // Minimum tile extents (pixels) along a region's axis, and the floor; set each frame.
  struct Metrics {
    float top = 0, bottom = 0;  // below the menu bar, above the status bar
    float left_bottom = 0;      // the left column's lower edge (0: bottom)
    float min_tile_h = 120, min_tile_w = 320;
    float min_left = 0;                             // the left column's least width (the Training form), 0: none
    std::function<void(const Panel*)> after_panel;  // called after each panel drawn (may be empty)
  };
  // Draws every open panel in its tile, then the splitters (which the mouse drags).
  void draw(FrameContext& ctx, const Metrics& m);

  const LayoutGeometry& geometry() const { return geom_; }
  // Per panel drawn last frame, whether its content ran past its tile with no scrollbar
  // ("x", "y", "xy"); absent when it fits or scrolls.
  const std::map<std::string, std::string>& cut() const { return cut_; }
  // The sidecar's "layout" object (rectangles in pixels × the framebuffer scale).
  std::string sidecar_json(float sx, float sy) const;

 private:
  void draw_tile(FrameContext& ctx, const Metrics& m, Region r, int index, const std::vector<Panel*>& panels,
                 LayoutRect rect);
  void draw_splitter(const char* id, LayoutRect rect, bool vertical, int which);
  void tab_menu(Panel* p);

  std::vector<Panel*> panels_;
  LayoutState state_;
  LayoutGeometry geom_;
  LayoutInput input_;
  std::map<const Panel*, bool> was_open_;  // last frame: a panel just opened becomes the selected tab
  std::map<std::string, std::string> cut_;
  float grab_offset_ = 0.f;
  int dragging_ = -1;  // the splitter held (0 left, 1 right, 2 bottom), −1 none
};

}  // namespace attnviz::ui
