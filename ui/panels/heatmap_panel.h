// The attention heatmap of the selected layer and head, one tab per stage: scores (q·kᵀ),
// scaled (/√d), masked, softmax, and Q, K, V, head output. The matrix is a texture
// (uploaded once per change, drawn with ImGui::Image), with token labels on both axes,
// a colorbar with the value range, a distinct colour for masked (−inf) cells (and another,
// with a framed band, for the keys a local layer's window hides), a tooltip
// with the exact numbers of the hovered cell, and a strip under the matrix with the weights
// of the hovered (or selected) query row as bars, its strongest keys named. An extra tab
// shows attention rollout up to the selected layer (core/engine/rollout.h), an
// approximation of how the tokens mix through the layers.
//
// Navigation (ui/heatmap_view.h): the wheel zooms about the cursor (from fit-to-panel to
// kMaxCellPx pixels per cell), a left drag pans, a click without movement selects a cell
// (its row becomes the query), Home or "fit" shows the whole matrix, "go to" centres a
// token's row and column; zoomed in, a minimap in the corner shows where the view is
// (click or drag in it to move). The texture holds only the cells around the view, at the
// resolution on screen: max-pooled blocks where cells are smaller than a pixel, refined as
// one zooms in, exact from one pixel per cell. It is rebuilt when the data, the head or
// stage, or the view changes, never every frame.
#pragma once
#include <string>

#include "ui/panels/export_box.h"
#include "ui/state/heatmap_view.h"
#include "ui/panels/panel.h"
#include "ui/draw/texture.h"

namespace attnviz::ui {

class HeatmapPanel : public Panel {
 public:
  HeatmapPanel() : Panel("Attention heatmap") {}
  // Screen rectangle (x, y, w, h) of the matrix drawn last frame; w = 0 when none.
  ImVec4 image_rect() const { return image_rect_; }
  ImVec4 sink_rect() const { return sink_rect_; }  // the sink column drawn last frame (x, y, w, h); zero: none
  bool showing_rollout() const { return rollout_; }
  // The caption, the layer and head fields, the stage tabs and the stage's explanation drawn
  // by another panel (the Caption panel of the Classroom layout): this one draws the matrix.
  void set_caption_elsewhere(bool on) { caption_elsewhere_ = on; }
  // What the Caption panel draws (the same selection as the matrix).
  void draw_caption(FrameContext& ctx);
  // Centres the view on token i's row and column (the --heatmap-center flag) at the next
  // frame with a trace; an index out of range shows the go-to field's message instead.
  void go_to(int i) { pending_goto_ = i; }
  // True while a coarse texture waits to be refined: the event loop keeps drawing.
  bool refining() const { return refine_pending_; }
  // What the navigation shows, for the screenshot sidecar.
  struct NavState {
    float zoom = 0, fit = 0, x0 = 0, y0 = 0;  // pixels per cell; cell coordinates of the view's corner
    int tex_w = 0, tex_h = 0;                 // the texture's texels
    CellRect tex_cells;                       // the cells it covers
    int rebuilds = 0;                         // textures built so far
    int64_t rows_computed = 0;                // matrix rows computed for it so far (not read from the trace)
    int64_t rows_pooled = 0;                  // texel rows pooled and uploaded so far (a keystroke at the fit zoom: one or two)
    bool minimap = false;
    int strip_row = -1;  // the row the bar strip shows (−1: none)
    std::string goto_error;
  };
  NavState nav_state() const;

 protected:
  void draw_content(FrameContext& ctx) override;
  // The matrix and its colour bar take the room there is, no more: no scrollbars (the wheel zooms).
  ImGuiWindowFlags window_flags() const override { return ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse; }

 private:
  void draw_controls(FrameContext& ctx);
  void draw_tabs(FrameContext& ctx);
  void draw_big_caption(FrameContext& ctx);
  void draw_explanation(FrameContext& ctx, bool one_line);  // one_line: ellipsised, the rest on hover
  // Where the matrix of this frame lies: cells, labels, screen positions.
  struct MatrixLayout {
    int rows = 0, cols = 0;
    bool square = false;                 // (T, T) stage: tokens on both axes
    const std::vector<std::string>* row_labels = nullptr;  // [rows] token labels
    float label_w = 0, left = 0, top = 0, cell = 1;        // cell: pixels per cell (the zoom)
    ImVec2 origin, p0, img;  // child window origin, the whole matrix's top-left (off screen when
                             // panned) and size
    ImVec2 vp0, vp;          // the viewport: top-left and size on screen
    CellRect vis;            // the cells in view
    float sink_w = 0;        // > 0: GPT-OSS's sink column, this wide, left of the matrix
  };
  // The matrix on screen, (rows, cols) row-major: in the trace, or computed once per change
  // into values_ (derived stages, compact traces, rollout). Sets key_, range_, cmap_.
  const float* matrix_data(FrameContext& ctx, int rows, int cols);
  void build_texture(Texture& tex, const float* data, int rows, int cols, const CellRect& src, int* h, int* w);
  void update_texture(const float* data, int rows, int cols, bool interacting);
  void colour_grid_rows(int y0, int y1);
  void draw_matrix(FrameContext& ctx, float width, float height);
  void handle_input(FrameContext& ctx, const MatrixLayout& m, ImVec2 vp0, ImVec2 vp);
  void apply_go_to(FrameContext& ctx, int i, int rows, int cols);
  void draw_go_to(FrameContext& ctx);
  ImVec4 minimap_rect(ImVec2 vp0, ImVec2 vp) const;  // (x, y, w, h) on screen; w = 0 when hidden
  void draw_minimap(const float* data, ImVec2 vp0, ImVec2 vp);
  void draw_row_strip(FrameContext& ctx, const MatrixLayout& m, ImVec2 vp0, ImVec2 vp, float strip_h);
  void draw_axis_labels(const FrameContext& ctx, const MatrixLayout& m) const;
  // A layer with sinks (GPT-OSS), on the softmax tab: each row's sink probability as a column
  // of cells before key 0, in the heatmap's colours, its value on hover.
  void draw_sink_column(const FrameContext& ctx, const MatrixLayout& m);
  void draw_highlights(FrameContext& ctx, const MatrixLayout& m, bool hovered);
  void draw_colorbar(FrameContext& ctx, float height);
  void draw_window_line(const FrameContext& ctx) const;
  void draw_window_band(const FrameContext& ctx, const MatrixLayout& m) const;
  // Chat mode: each turn's role as a coloured bar beside the rows (and over the columns of a
  // (T, T) stage), and a line where each turn begins.
  void draw_chat_turns(const FrameContext& ctx, const MatrixLayout& m, ImVec2 shown) const;  // shown: the viewport's drawn part
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
  Key key_;  // what values_data_ and tex_ show
  const Trace* key_trace_ = nullptr;
  const float* data_ = nullptr;  // the matrix of key_: in the trace or in values_
  int values_T_ = 0;             // values_ is (values_T_, values_T_) when data_ points into it
  int64_t data_ld_ = 0;          // floats from one row of data_ to the next (≥ its columns)
  int64_t rows_computed_ = 0;    // rows of heads computed into values_ so far (a keystroke: the new ones)
  ExportBox export_{"attnviz-heatmap.png"};
  Texture tex_;     // (tex_cap_h_, tex_cap_w_) RGBA: grid_'s texels in its top-left (tex_h_, tex_w_) corner
  PoolGrid grid_;   // the texels of tex_, max-pooled on fixed block edges
  std::vector<uint8_t> grid_rgba_;  // (tex_cap_h_, tex_cap_w_, 4) their colours
  int tex_cap_h_ = 0, tex_cap_w_ = 0;
  ValueRange tex_range_;  // the range grid_rgba_ was coloured with
  CellRect tex_cells_;    // the cells grid_ covers
  int tex_h_ = 0, tex_w_ = 0;
  bool tex_stale_ = true;  // the data changed since tex_ was built
  int changed_from_ = -1;  // stale: its rows ≥ this changed, the rest as tex_ shows them (−1: all of it)
  int64_t rows_pooled_ = 0;  // texel rows pooled into tex_ so far
  int rebuilds_ = 0;
  bool refine_pending_ = false;
  std::vector<float> pooled_;  // (tex_h_, tex_w_) scratch
  Texture mini_;               // the whole matrix, max-pooled to the minimap's size
  bool mini_stale_ = true;
  int mini_h_ = 0, mini_w_ = 0;
  HeatmapView view_;
  double last_input_ = -1.0;  // ImGui time of the last wheel or drag on the matrix
  enum class Drag { None, Pan, Minimap } drag_ = Drag::None;
  bool moved_ = false;           // the current drag went past the click threshold
  int sel_i_ = -1, sel_j_ = -1;  // the selected cell (a click, go to), −1: none
  int strip_row_ = -1;
  int hover_i_ = -1, hover_j_ = -1;       // the cell under the mouse this frame (−1: none)
  int pool_window_ = 0;                   // the local layer's window the pooling leaves out (0: none)
  float label_font_ = 0.f;                // the font size label_w_ was measured at
  uint64_t labels_serial_ = 0;            // trace serial the row labels were made for
  std::vector<std::string> label_cache_;  // (T) row labels
  float label_w_ = 0.f;
  char goto_buf_[24] = "";
  std::string goto_error_;
  int pending_goto_ = -1;
  std::vector<float> strip_buf_, strip_bins_;  // a row of weights (T) and its bars
  ValueRange range_;          // value range of the colours in tex_
  Colormap cmap_ = Colormap::Viridis;
  Texture colorbars_[kColormapCount];  // (256, 1) each, top = high
  std::vector<uint8_t> rgba_;  // scratch for uploads
  std::vector<float> values_;  // a derived stage (scaled, masked) of the head on screen
  Stage shown_tab_ = Stage::Probs;  // the tab ImGui shows; differs from state.stage while a shortcut switches
  bool tabs_synced_ = false;        // false until ImGui's tab bar shows state.stage (first frames)
  bool caption_elsewhere_ = false;
  bool rollout_ = false;            // the rollout tab is shown instead of a stage
  float fit_cell_ = 8.f;            // cell size that fits the panel: the least zoom
  ImVec4 image_rect_{0, 0, 0, 0};
  ImVec4 sink_rect_{0, 0, 0, 0};
};

}  // namespace attnviz::ui
