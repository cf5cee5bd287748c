#include "ui/state/heatmap_view.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/engine/mask.h"

namespace attnviz::ui {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Offset along one axis: the matrix covers the viewport where it can, else sits at 0.
float clamp_offset(float off, int cells, float view_px, float zoom) {
  const float span = view_px / zoom;  // cells in view
  const float hi = static_cast<float>(cells) - span;
  if (!(hi > 0.f) || !std::isfinite(off)) return 0.f;  // the whole axis fits (or nonsense): at 0
  return std::clamp(off, 0.f, hi);
}

// Row i's columns the mask keeps: [lo, hi) within [c0, c1).
void kept_columns(int i, int c0, int c1, PoolMask m, int* lo, int* hi) {
  *lo = c0, *hi = c1;
  if (m.causal) *hi = std::min(c1, i + 1);
  if (m.window > 0) *lo = std::max(c0, window_first(i, m.window));
}
}  // namespace

void clamp_view(HeatmapView& v) {
  if (!(v.fit > 0.f) || !std::isfinite(v.fit)) v.fit = 1.f;
  if (!(v.zoom > 0.f) || !std::isfinite(v.zoom)) v.zoom = v.fit;
  v.zoom = std::clamp(v.zoom, v.fit, v.max_zoom());
  v.x0 = clamp_offset(v.x0, v.cols, v.vw, v.zoom);
  v.y0 = clamp_offset(v.y0, v.rows, v.vh, v.zoom);
}

void set_frame(HeatmapView& v, int rows, int cols, float vw, float vh, float fit) {
  const bool at_fit = !v.zoomed();
  const bool resized = vw != v.vw || vh != v.vh;
  const float cx = v.cell_x(v.vw * 0.5f), cy = v.cell_y(v.vh * 0.5f);
  v.rows = std::max(0, rows), v.cols = std::max(0, cols);
  v.vw = std::isfinite(vw) ? std::max(0.f, vw) : 0.f;
  v.vh = std::isfinite(vh) ? std::max(0.f, vh) : 0.f;
  v.fit = fit;
  if (at_fit) v.zoom = fit;
  clamp_view(v);
  if (resized && !at_fit) center_on(v, cx, cy);
}

void zoom_at(HeatmapView& v, float zoom, float px, float py) {
  const float cx = v.cell_x(px), cy = v.cell_y(py);
  v.zoom = zoom;
  clamp_view(v);  // the zoom first: the offsets follow from it
  v.x0 = cx - px / v.zoom;
  v.y0 = cy - py / v.zoom;
  clamp_view(v);
}

void pan_by(HeatmapView& v, float dx, float dy) {
  v.x0 -= dx / v.zoom;
  v.y0 -= dy / v.zoom;
  clamp_view(v);
}

void center_on(HeatmapView& v, float cx, float cy) {
  v.x0 = cx - v.vw * 0.5f / v.zoom;
  v.y0 = cy - v.vh * 0.5f / v.zoom;
  clamp_view(v);
}

void fit_view(HeatmapView& v) {
  v.zoom = v.fit;
  v.x0 = v.y0 = 0.f;
  clamp_view(v);
}

CellRect visible_cells(const HeatmapView& v) {
  if (v.rows <= 0 || v.cols <= 0 || v.vw <= 0.f || v.vh <= 0.f) return {};
  auto range = [&](float off, float px, int n, int* a, int* b) {
    *a = std::clamp(static_cast<int>(std::floor(off)), 0, n);
    // A cell whose edge is at the viewport's far edge (to a thousandth of a cell) is not in view.
    *b = std::clamp(static_cast<int>(std::ceil(off + px / v.zoom - 1e-3f)), *a, n);
  };
  CellRect r;
  range(v.y0, v.vh, v.rows, &r.r0, &r.r1);
  range(v.x0, v.vw, v.cols, &r.c0, &r.c1);
  return r;
}

bool cell_at(const HeatmapView& v, float px, float py, int* i, int* j) {
  const float cx = v.cell_x(px), cy = v.cell_y(py);
  if (!(cx >= 0.f && cy >= 0.f)) return false;
  const int jj = static_cast<int>(std::floor(cx)), ii = static_cast<int>(std::floor(cy));
  if (ii >= v.rows || jj >= v.cols) return false;
  *i = ii, *j = jj;
  return true;
}

CellRect texel_block(const CellRect& src, int h, int w, int y, int x) {
  const int64_t n = src.rows(), m = src.cols();
  CellRect b;
  b.r0 = src.r0 + static_cast<int>(static_cast<int64_t>(y) * n / h);
  b.r1 = src.r0 + static_cast<int>(static_cast<int64_t>(y + 1) * n / h);
  b.c0 = src.c0 + static_cast<int>(static_cast<int64_t>(x) * m / w);
  b.c1 = src.c0 + static_cast<int>(static_cast<int64_t>(x + 1) * m / w);
  return b;
}

void texel_grid(const CellRect& src, float zoom, int* h, int* w) {
  auto one = [&](int n) {
    if (n <= 0) return 0;
    if (!(zoom < 1.f)) return n;  // a pixel or more per cell (NaN: exact too)
    const double px = std::ceil(static_cast<double>(n) * std::max(zoom, 0.f) - 1e-3);
    return static_cast<int>(std::clamp(px, 1.0, static_cast<double>(n)));
  };
  *h = one(src.rows());
  *w = one(src.cols());
}

namespace {
// Pools texel rows [y_begin, y_end) of a grid whose texel row y covers matrix rows
// [row_edge[y], row_edge[y + 1]) and texel column x columns [col_edge[x], col_edge[x + 1])
// (both ascending, clipped to the matrix) into out: (y_end − y_begin, w) at w floats a row,
// w = col_edge.size() − 1. Cells `mask` leaves out, NaN and −inf are skipped; a block with
// nothing left is −inf, NaN when it held only NaN.
void pool_rows(const float* data, int64_t ld, const std::vector<int>& row_edge, const std::vector<int>& col_edge,
               int y_begin, int y_end, PoolMode mode, PoolMask mask, float* out) {
  const int w = static_cast<int>(col_edge.size()) - 1;
  if (w <= 0 || y_end <= y_begin) return;
  const int c_lo = col_edge.front(), c_hi = col_edge.back();
  // Texel rows are independent: split over the cores when there is enough to read (a
  // 2000 × 2000 head at the fit zoom takes about 2 ms on one core).
  const bool split =
      static_cast<int64_t>(row_edge[y_end] - row_edge[y_begin]) * (c_hi - c_lo) >= (int64_t{1} << 20);
#pragma omp parallel for schedule(static) if (split)
  for (int y = y_begin; y < y_end; ++y) {
    float* acc = out + static_cast<size_t>(y - y_begin) * w;  // (w)
    std::fill(acc, acc + w, kNegInf);
    std::vector<float> mag;  // Extreme: |best| per texel of this texel row
    if (mode == PoolMode::Extreme) mag.assign(static_cast<size_t>(w), -1.f);
    for (int i = row_edge[y]; i < row_edge[y + 1]; ++i) {
      const float* row = data + static_cast<int64_t>(i) * ld;
      int lo = 0, hi = 0;
      kept_columns(i, c_lo, c_hi, mask, &lo, &hi);
      if (lo >= hi) continue;
      // The texels whose columns meet [lo, hi).
      const int x_first =
          static_cast<int>(std::upper_bound(col_edge.begin(), col_edge.end(), lo) - col_edge.begin()) - 1;
      for (int x = std::max(x_first, 0); x < w && col_edge[x] < hi; ++x) {
        const int a = std::max(lo, col_edge[x]), b = std::min(hi, col_edge[x + 1]);
        if (mode == PoolMode::Max) {
          float m = acc[x];
          for (int j = a; j < b; ++j) m = row[j] > m ? row[j] : m;  // NaN and −inf never win
          acc[x] = m;
        } else {
          float best = acc[x], best_abs = mag[x];
          for (int j = a; j < b; ++j) {
            const float val = row[j], av = std::fabs(val);
            if (val != kNegInf && av > best_abs) best = val, best_abs = av;  // NaN: av > … is false
          }
          acc[x] = best, mag[x] = best_abs;
        }
      }
    }
    // A block with nothing pooled: −inf, or NaN when every kept cell was NaN.
    for (int x = 0; x < w; ++x) {
      if (acc[x] != kNegInf) continue;
      bool kept = false, only_nan = true;
      for (int i = row_edge[y]; i < row_edge[y + 1] && only_nan; ++i) {
        int lo = 0, hi = 0;
        kept_columns(i, col_edge[x], col_edge[x + 1], mask, &lo, &hi);
        for (int j = lo; j < hi && only_nan; ++j) {
          kept = true;
          only_nan = std::isnan(data[static_cast<int64_t>(i) * ld + j]);
        }
      }
      if (kept && only_nan) acc[x] = std::numeric_limits<float>::quiet_NaN();
    }
  }
}

// Clips src to a (rows, cols) matrix.
CellRect clip_cells(CellRect src, int rows, int cols) {
  src.r0 = std::clamp(src.r0, 0, std::max(rows, 0)), src.r1 = std::clamp(src.r1, src.r0, std::max(rows, 0));
  src.c0 = std::clamp(src.c0, 0, std::max(cols, 0)), src.c1 = std::clamp(src.c1, src.c0, std::max(cols, 0));
  return src;
}

// The edges of texels [t0, t0 + n) on the fixed grid of s cells per texel, clipped to [0, limit].
std::vector<int> grid_edges(double s, int t0, int n, int limit) {
  std::vector<int> e(static_cast<size_t>(n) + 1);
  for (int k = 0; k <= n; ++k) e[k] = std::clamp(grid_edge(s, t0 + k), 0, limit);
  return e;
}
}  // namespace

void pool_cells(const float* data, int rows, int cols, CellRect src, int h, int w, PoolMode mode, PoolMask mask,
                std::vector<float>& out, int* out_h, int* out_w, int64_t ld) {
  if (ld <= 0) ld = cols;
  src = clip_cells(src, rows, cols);
  if (!data || src.empty()) {
    out.clear();
    if (out_h) *out_h = 0;
    if (out_w) *out_w = 0;
    return;
  }
  h = std::clamp(h, 1, src.rows());
  w = std::clamp(w, 1, src.cols());
  out.assign(static_cast<size_t>(h) * static_cast<size_t>(w), kNegInf);
  std::vector<int> row_edge(static_cast<size_t>(h) + 1), col_edge(static_cast<size_t>(w) + 1);
  for (int y = 0; y < h; ++y) row_edge[y] = texel_block(src, h, w, y, 0).r0;
  for (int x = 0; x < w; ++x) col_edge[x] = texel_block(src, h, w, 0, x).c0;
  row_edge[h] = src.r1, col_edge[w] = src.c1;
  pool_rows(data, ld, row_edge, col_edge, 0, h, mode, mask, out.data());
  if (out_h) *out_h = h;
  if (out_w) *out_w = w;
}

int grid_edge(double s, int k) {
  // ⌊k·s⌋, a hair above so that s = 2 gives 2k exactly however s was computed
  return static_cast<int>(std::floor(static_cast<double>(k) * s + 1e-9));
}

int grid_texel(double s, int cell) {
  int k = static_cast<int>(std::floor(static_cast<double>(cell) / s));
  while (k > 0 && grid_edge(s, k) > cell) --k;
  while (grid_edge(s, k + 1) <= cell) ++k;
  return k;
}

double grid_scale(float zoom) {
  if (!(zoom < 1.f)) return 1.0;  // a pixel or more per cell (NaN too): one texel per cell
  const double want = 1.0 / std::max(static_cast<double>(zoom), 1e-6);
  // The smallest 1.05^k ≥ want (k ≥ 1: below one pixel per cell means at least 1.05 cells a texel).
  const double k = std::max(1.0, std::ceil(std::log(want) / std::log(kGridStep) - 1e-9));
  return std::pow(kGridStep, k);
}

CellRect PoolGrid::cells() const {
  if (s <= 0 || h <= 0 || w <= 0) return CellRect{};
  return clip_cells(CellRect{grid_edge(s, ty0), grid_edge(s, ty0 + h), grid_edge(s, tx0), grid_edge(s, tx0 + w)}, rows,
                    cols);
}

CellRect PoolGrid::block(int y, int x) const {
  return clip_cells(CellRect{grid_edge(s, ty0 + y), grid_edge(s, ty0 + y + 1), grid_edge(s, tx0 + x),
                             grid_edge(s, tx0 + x + 1)},
                    rows, cols);
}

void pool_grid(const float* data, int rows, int cols, int64_t ld, CellRect src, double s, PoolMode mode,
               PoolMask mask, PoolGrid& g) {
  if (ld <= 0) ld = cols;
  src = clip_cells(src, rows, cols);
  g = PoolGrid{};
  if (!data || src.empty() || !(s >= 1.0)) return;
  g.s = s, g.rows = rows, g.cols = cols, g.mode = mode, g.mask = mask;
  g.ty0 = grid_texel(s, src.r0), g.tx0 = grid_texel(s, src.c0);
  g.h = grid_texel(s, src.r1 - 1) + 1 - g.ty0, g.w = grid_texel(s, src.c1 - 1) + 1 - g.tx0;
  g.values.assign(static_cast<size_t>(g.h) * static_cast<size_t>(g.w), kNegInf);
  pool_rows(data, ld, grid_edges(s, g.ty0, g.h, rows), grid_edges(s, g.tx0, g.w, cols), 0, g.h, mode, mask,
            g.values.data());
}

bool pool_grid_update(const float* data, int rows, int cols, int64_t ld, int from, PoolGrid& g, int* y0, int* y1,
                      bool* resized) {
  if (ld <= 0) ld = cols;
  *y0 = *y1 = 0, *resized = false;
  if (!data || g.s <= 0 || rows <= 0 || cols <= 0) return false;
  // Columns that come or go keep the old rows' blocks only where the causal mask hides them
  // from every row before `from` (a square matrix that grows or shrinks along its diagonal).
  if (cols != g.cols && !(g.mask.causal && rows == cols && g.rows == g.cols)) return false;
  from = std::clamp(from, 0, std::min(rows, g.rows));
  // The texel rows and columns held from here: to the matrix's end where the grid reached it
  // before, and never past it.
  auto extent = [&](int t0, int n, int old_end, int end) {
    const bool reached = grid_edge(g.s, t0 + n) >= old_end;
    const int last = grid_texel(g.s, end - 1);  // the texel holding the new last cell
    return reached ? last + 1 - t0 : std::min(n, last + 1 - t0);
  };
  const int h = extent(g.ty0, g.h, g.rows, rows), w = extent(g.tx0, g.w, g.cols, cols);
  if (h <= 0 || w <= 0) return false;
  if (w != g.w) {  // the same texel rows at the new width; a new column's old blocks are masked: −inf
    std::vector<float> v(static_cast<size_t>(g.h) * static_cast<size_t>(w), kNegInf);
    for (int y = 0; y < g.h; ++y)
      std::copy_n(g.values.data() + static_cast<size_t>(y) * g.w, std::min(w, g.w), v.data() + static_cast<size_t>(y) * w);
    g.values.swap(v);
  }
  *resized = h != g.h || w != g.w;
  g.values.resize(static_cast<size_t>(h) * static_cast<size_t>(w), kNegInf);
  g.h = h, g.w = w, g.rows = rows, g.cols = cols;
  const int first = std::max(0, grid_texel(g.s, from) - g.ty0);
  if (first < h)
    pool_rows(data, ld, grid_edges(g.s, g.ty0, h, rows), grid_edges(g.s, g.tx0, w, cols), first, h, g.mode, g.mask,
              g.values.data() + static_cast<size_t>(first) * w);
  *y0 = std::min(first, h), *y1 = h;
  return true;
}

bool block_outside_window(const CellRect& b, int window) {
  // Some cell (i, j) of the block with j ≤ i − W: the smallest column against the largest row.
  return window > 0 && !b.empty() && static_cast<int64_t>(b.c0) <= static_cast<int64_t>(b.r1) - 1 - window;
}

bool parse_token_index(const std::string& text, int n, int* index, std::string* message) {
  const std::string range = n > 0 ? "0 \xE2\x80\xA6 " + std::to_string(n - 1) : "none: there are no tokens";
  const char* s = text.c_str();
  while (*s == ' ' || *s == '\t') ++s;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  const bool digits = end != s && (*s == '-' || *s == '+' || (*s >= '0' && *s <= '9'));
  while (end && (*end == ' ' || *end == '\t')) ++end;
  if (!digits || !end || *end != '\0') {
    *message = "'" + text + "' is not a token number; tokens: " + range;
    return false;
  }
  if (errno == ERANGE || v < 0 || v >= n) {
    *message =
        (errno == ERANGE ? "'" + text + "'" : "token " + std::to_string(v)) + " is out of range; tokens: " + range;
    return false;
  }
  *index = static_cast<int>(v);
  return true;
}

}  // namespace attnviz::ui
