// The attention heatmap's navigation without ImGui or GL: the view transform (zoom about a
// point, pan, clamping, the cells in view) and the max-pooling that builds the texture at
// the resolution on screen. Unit-tested in tests/test_heatmap_view.cpp.
//
// Coordinates: a matrix of (rows, cols) cells; cell (i, j) (row i = query, column j = key)
// covers [j, j + 1) × [i, i + 1) in cell coordinates (x = column, y = row). The viewport
// is (vw, vh) pixels; pixel (px, py) is measured from its top-left corner.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attnviz::ui {

// The largest zoom: this many pixels per cell (more only when the matrix fits larger).
constexpr float kMaxCellPx = 64.f;

// A rectangle of cells: rows [r0, r1) × columns [c0, c1).
struct CellRect {
  int r0 = 0, r1 = 0, c0 = 0, c1 = 0;
  int rows() const { return r1 - r0; }
  int cols() const { return c1 - c0; }
  bool empty() const { return r1 <= r0 || c1 <= c0; }
  bool contains(const CellRect& o) const { return o.r0 >= r0 && o.r1 <= r1 && o.c0 >= c0 && o.c1 <= c1; }
  bool operator==(const CellRect& o) const { return r0 == o.r0 && r1 == o.r1 && c0 == o.c0 && c1 == o.c1; }
};

struct HeatmapView {
  int rows = 0, cols = 0;    // the matrix: (rows, cols) cells
  float vw = 0.f, vh = 0.f;  // the viewport in pixels
  float fit = 1.f;           // pixels per cell that show the whole matrix: the least zoom
  float zoom = 1.f;          // pixels per cell, in [fit, max_zoom()]
  float x0 = 0.f, y0 = 0.f;  // the cell coordinates at the viewport's top-left corner

  float max_zoom() const { return fit > kMaxCellPx ? fit : kMaxCellPx; }
  bool zoomed() const { return zoom > fit * 1.0001f; }  // less than the whole matrix may be in view
  // Pixel (px, py) of the viewport → cell coordinates, and back.
  float cell_x(float px) const { return x0 + px / zoom; }
  float cell_y(float py) const { return y0 + py / zoom; }
  float px_of(float cx) const { return (cx - x0) * zoom; }
  float py_of(float cy) const { return (cy - y0) * zoom; }
};

// Sets the matrix and the viewport (and the fit zoom), keeps the zoom and the cell at the
// viewport's centre where they still fit, then clamps. Sizes ≤ 0 give an empty view.
void set_frame(HeatmapView& v, int rows, int cols, float vw, float vh, float fit);
// Zoom in [fit, max_zoom()]; offsets so the matrix covers the viewport where it can (the
// matrix at the top-left corner along an axis it does not fill). NaN zoom becomes fit.
void clamp_view(HeatmapView& v);
// Zooms to `zoom` (clamped) keeping the cell under pixel (px, py) under it (unless that
// would show space past the matrix's edge: then clamped).
void zoom_at(HeatmapView& v, float zoom, float px, float py);
// Moves the contents by (dx, dy) pixels (a drag), clamped.
void pan_by(HeatmapView& v, float dx, float dy);
// Puts cell coordinates (cx, cy) at the viewport's centre, clamped.
void center_on(HeatmapView& v, float cx, float cy);
// Back to the whole matrix: zoom = fit, offsets 0.
void fit_view(HeatmapView& v);
// The cells at least partly in view (empty for an empty view).
CellRect visible_cells(const HeatmapView& v);
// The cell under pixel (px, py): false when it is outside the matrix.
bool cell_at(const HeatmapView& v, float px, float py, int* i, int* j);

// ---------- max-pooling into a texture
// How a block of cells becomes one texel.
enum class PoolMode {
  Max,      // the largest value (weights: a single strong cell never disappears)
  Extreme,  // the value of largest magnitude, with its sign (signed scores: strong negatives stay too)
};
// Cells left out of the pooling: the causal future (j > i) and, with window W > 0, the keys
// a local layer's window hides (j < i − W + 1). A block of masked cells only pools to −inf.
struct PoolMask {
  bool causal = false;
  int window = 0;
};

// The cells texel (y, x) of an (h, w) grid over `src` covers: rows
// [r0 + ⌊y·n/h⌋, r0 + ⌊(y+1)·n/h⌋) with n = src.rows() (h ≤ n), columns likewise.
CellRect texel_block(const CellRect& src, int h, int w, int y, int x);
// The texture grid for the cells of `src` shown at `zoom` pixels per cell: one texel per
// cell when cells are at least a pixel, else one texel per pixel (rounded up): (h, w).
void texel_grid(const CellRect& src, float zoom, int* h, int* w);
// data: (rows, cols) row-major, rows ld floats apart (0: cols). out: (h, w) row-major, texel (y, x) pooled over
// texel_block(src, h, w, y, x) by `mode`; cells `mask` leaves out, NaN and −inf are skipped,
// and a block with nothing left is −inf (NaN when it held only NaN). `src` is clipped to the
// matrix, and h, w to [1, its rows / cols]; an empty source gives an empty `out` (h = w = 0).
void pool_cells(const float* data, int rows, int cols, CellRect src, int h, int w, PoolMode mode, PoolMask mask,
                std::vector<float>& out, int* out_h = nullptr, int* out_w = nullptr, int64_t ld = 0);
// ---------- pooling on fixed block edges
// Texel k of an axis covers cells [grid_edge(s, k), grid_edge(s, k + 1)), with s ≥ 1 cells
// per texel, wherever the texture starts and however large the matrix is. texel_block's
// edges (⌊y·n/h⌋) move whenever n does, so a typed token re-pooled the whole matrix at the
// fit zoom; on this grid it re-pools the texel rows of the rows that changed.
constexpr double kGridStep = 1.05;  // the ladder of cells per texel below one pixel per cell
int grid_edge(double s, int k);      // ⌊k·s⌋
int grid_texel(double s, int cell);  // the texel k whose cells hold `cell`
// Cells per texel for `zoom` pixels per cell: 1 from one pixel per cell up, else the smallest
// 1.05^k (k ≥ 1) ≥ 1 / zoom, so texels are 1 to 1.05 pixels and s stays put while the zoom
// moves by less than that (the fit zoom of a text that grows by a few tokens).
double grid_scale(float zoom);

struct PoolGrid {
  double s = 0;             // cells per texel (0: nothing pooled)
  int ty0 = 0, tx0 = 0;     // the first texel row and column held
  int h = 0, w = 0;         // texels held: rows [ty0, ty0 + h) × columns [tx0, tx0 + w)
  int rows = 0, cols = 0;   // the matrix they were pooled from
  PoolMode mode = PoolMode::Max;
  PoolMask mask;
  std::vector<float> values;  // (h, w): texel (y, x) is the block (ty0 + y, tx0 + x), pooled as pool_cells pools
  CellRect cells() const;           // the cells the texels cover, clipped to the matrix
  CellRect block(int y, int x) const;  // the cells of texel (y, x), clipped to the matrix
};
// Pools every texel whose block meets `src` (clipped to the matrix) at s cells per texel.
// data: (rows, cols), rows ld floats apart (0: cols). s < 1 or an empty source: g.s = 0.
void pool_grid(const float* data, int rows, int cols, int64_t ld, CellRect src, double s, PoolMode mode,
               PoolMask mask, PoolGrid& g);
// The matrix changed from row `from` on and may have grown or shrunk, its rows before `from`
// as they were. Re-pools the texel rows that meet rows ≥ from, extending (or cutting) the
// grid to the matrix's new end where it reached the old one. *y0, *y1: the texel rows
// re-pooled (y1 = g.h); *resized: h or w changed (new columns of the old rows are −inf).
// false, g unchanged, when that would be wrong: columns that came or went in a matrix that
// is not causally masked (their cells in the old rows would count), or nothing held.
bool pool_grid_update(const float* data, int rows, int cols, int64_t ld, int from, PoolGrid& g, int* y0, int* y1,
                      bool* resized);
// A block that pooled to −inf because of the mask: true when some of its cells are hidden by
// the window (j ≤ i − W) rather than all by the causal mask (the heatmap's brown, not grey).
bool block_outside_window(const CellRect& b, int window);

// "Go to token": the text typed (a whole number, spaces around allowed) → a token index in
// [0, n); false with a message that says what is wrong and what range holds otherwise.
bool parse_token_index(const std::string& text, int n, int* index, std::string* message);

}  // namespace attnviz::ui
