// The attention heatmap of the selected layer and head, one tab per stage: scores (q·kᵀ),
// scaled (/√d), masked, softmax, and Q, K, V, head output. The matrix is a texture
// (uploaded once per change, drawn with ImGui::Image), with token labels on both axes,
// a colorbar with the value range, a distinct colour for masked (−inf) cells (and another,
// with a framed band, for the keys a local layer's window hides), a tooltip
// with the exact numbers of the hovered cell, zoom (Ctrl+wheel) and scrolling. An extra
// tab shows attention rollout up to the selected layer (core/engine/rollout.h), an
// approximation of how the tokens mix through the layers.
#pragma once
#include "ui/export_box.h"
#include "ui/panel.h"
#include "ui/texture.h"

namespace attnviz::ui {

class HeatmapPanel : public Panel {
 public:
  HeatmapPanel() : Panel("Attention heatmap") {}
  // Screen rectangle (x, y, w, h) of the matrix drawn last frame; w = 0 when none.
  ImVec4 image_rect() const { return image_rect_; }
  bool showing_rollout() const { return rollout_; }

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  void draw_controls(FrameContext& ctx);
  void draw_tabs(FrameContext& ctx);
  // Where the matrix of this frame lies: cells, labels, screen positions.
  struct MatrixLayout {
    int rows = 0, cols = 0;
    bool square = false;                 // (T, T) stage: tokens on both axes
    std::vector<std::string> row_labels;  // [rows] token labels
    float label_w = 0, left = 0, top = 0, cell = 1;
    ImVec2 origin, p0, img;              // child window origin, matrix top-left, matrix size
  };
  void upload_if_changed(FrameContext& ctx);
  void draw_matrix(FrameContext& ctx, float width, float height);
  void draw_axis_labels(const FrameContext& ctx, const MatrixLayout& m) const;
  void draw_highlights(FrameContext& ctx, const MatrixLayout& m, bool hovered);
  void draw_colorbar(FrameContext& ctx, float height);
  void draw_window_line(const FrameContext& ctx) const;
  void draw_window_band(const FrameContext& ctx, const MatrixLayout& m) const;
  void cell_tooltip(const FrameContext& ctx, int i, int j) const;

  struct Key {
    uint64_t trace_serial = 0;
    int layer = -1, head = -1;
    Stage stage = Stage::Probs;
    Colormap cmap = Colormap::Viridis;
    bool rollout = false;
    bool operator==(const Key& o) const {
      return trace_serial == o.trace_serial && layer == o.layer && head == o.head && stage == o.stage && cmap == o.cmap &&
             rollout == o.rollout;
    }
  };
  Key key_;                   // what tex_ shows
  ExportBox export_{"attnviz-heatmap.png"};
  Texture tex_;               // (rows, cols) RGBA, one texel per cell
  ValueRange range_;          // value range of the colours in tex_
  Colormap cmap_ = Colormap::Viridis;
  Texture colorbars_[kColormapCount];  // (256, 1) each, top = high
  std::vector<uint8_t> rgba_;  // scratch for uploads
  std::vector<float> values_;  // a derived stage (scaled, masked) of the head on screen
  Stage shown_tab_ = Stage::Probs;  // the tab ImGui shows; differs from state.stage while a shortcut switches
  bool tabs_synced_ = false;        // false until ImGui's tab bar shows state.stage (first frames)
  bool rollout_ = false;            // the rollout tab is shown instead of a stage
  float fit_cell_ = 8.f;      // cell size that fits the panel (zoom starts from it)
  ImVec4 image_rect_{0, 0, 0, 0};
};

}  // namespace attnviz::ui
