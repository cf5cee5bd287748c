// ui/heatmap_view: the heatmap's navigation without ImGui. Max-pooling against a literal
// nested loop over every cell on random matrices of odd sizes (with masks, NaN and −inf),
// zoom about a point, clamping at the limits, the cells in view, "go to token" input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "ui/state/heatmap_view.h"

namespace attnviz::ui {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// One block's reference: cells [r0, r1) × [c0, c1) of a (rows ld floats apart) looked at one
// by one, those `mask` leaves out skipped; NaN when every kept cell was NaN.
float reference_block(const std::vector<float>& a, int ld, int r0, int r1, int c0, int c1, PoolMode mode,
                      PoolMask mask) {
  float best = -kInf;
  bool kept = false, all_nan = true;
  for (int i = r0; i < r1; ++i)
    for (int j = c0; j < c1; ++j) {
      if (mask.causal && j > i) continue;
      if (mask.window > 0 && j < i - mask.window + 1) continue;
      const float v = a[static_cast<size_t>(i) * ld + j];
      kept = true;
      if (std::isnan(v)) continue;
      all_nan = false;
      if (v == -kInf) continue;
      if (mode == PoolMode::Max ? v > best : (best == -kInf || std::fabs(v) > std::fabs(best))) best = v;
    }
  return kept && all_nan ? std::nanf("") : best;
}

// The reference: for texel (y, x) the rows ⌊y·n/h⌋ … ⌊(y+1)·n/h⌋ − 1 (and columns alike)
// of src.
std::vector<float> reference_pool(const std::vector<float>& a, int cols, CellRect src, int h, int w, PoolMode mode,
                                  PoolMask mask) {
  std::vector<float> out(static_cast<size_t>(h) * w);
  const int n = src.r1 - src.r0, m = src.c1 - src.c0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      out[static_cast<size_t>(y) * w + x] =
          reference_block(a, cols, src.r0 + y * n / h, src.r0 + (y + 1) * n / h, src.c0 + x * m / w,
                          src.c0 + (x + 1) * m / w, mode, mask);
  return out;
}

std::vector<float> random_matrix(int rows, int cols, std::mt19937& rng, bool specials) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> pick(0, 60);
  std::vector<float> a(static_cast<size_t>(rows) * cols);
  for (float& v : a) {
    v = nd(rng);
    if (!specials) continue;
    const int k = pick(rng);
    if (k == 0) v = std::nanf("");
    if (k == 1) v = -kInf;
  }
  return a;
}

void expect_same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < got.size(); ++k) {
    if (std::isnan(want[k])) {
      EXPECT_TRUE(std::isnan(got[k])) << what << " texel " << k << " got " << got[k];
      continue;
    }
    ASSERT_EQ(got[k], want[k]) << what << " texel " << k;  // the same cell's value, bit for bit
  }
}

TEST(HeatmapPool, MaxAndExtremeMatchNestedLoopsOnOddSizes) {
  std::mt19937 rng(7);
  const int sizes[][2] = {{1, 1}, {7, 13}, {37, 37}, {101, 53}, {129, 257}, {333, 211}};
  int checked = 0;
  for (auto [rows, cols] : sizes)
    for (bool specials : {false, true}) {
      const std::vector<float> a = random_matrix(rows, cols, rng, specials);
      std::uniform_int_distribution<int> ri(0, rows - 1), ci(0, cols - 1);
      for (int trial = 0; trial < 6; ++trial) {
        CellRect src{0, rows, 0, cols};
        if (trial > 1) {  // a sub-rectangle
          int r0 = ri(rng), r1 = ri(rng), c0 = ci(rng), c1 = ci(rng);
          src = {std::min(r0, r1), std::max(r0, r1) + 1, std::min(c0, c1), std::max(c0, c1) + 1};
        }
        std::uniform_int_distribution<int> hh(1, src.rows()), ww(1, src.cols());
        const int h = trial == 1 ? src.rows() : hh(rng), w = trial == 1 ? src.cols() : ww(rng);
        for (PoolMode mode : {PoolMode::Max, PoolMode::Extreme})
          for (PoolMask mask : {PoolMask{}, PoolMask{true, 0}, PoolMask{true, 5}}) {
            std::vector<float> got;
            int gh = 0, gw = 0;
            pool_cells(a.data(), rows, cols, src, h, w, mode, mask, got, &gh, &gw);
            EXPECT_EQ(gh, h);
            EXPECT_EQ(gw, w);
            expect_same(got, reference_pool(a, cols, src, h, w, mode, mask),
                        std::to_string(rows) + "x" + std::to_string(cols) + " -> " + std::to_string(h) + "x" +
                            std::to_string(w) + " mode " + std::to_string(static_cast<int>(mode)) + " causal " +
                            std::to_string(mask.causal) + " window " + std::to_string(mask.window));
            ++checked;
          }
      }
    }
  EXPECT_EQ(checked, 6 * 2 * 6 * 2 * 3);
}

// The fixed grid's reference: texel (y, x) covers rows ⌊(ty0 + y)·s⌋ … ⌊(ty0 + y + 1)·s⌋ − 1
// (and columns alike), cut at the matrix's end.
std::vector<float> reference_grid(const std::vector<float>& a, int ld, int rows, int cols, double s, int ty0, int h,
                                  int tx0, int w, PoolMode mode, PoolMask mask) {
  auto edge = [&](int k, int end) { return std::min(end, static_cast<int>(std::floor(k * s + 1e-9))); };
  std::vector<float> out(static_cast<size_t>(h) * w);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      out[static_cast<size_t>(y) * w + x] = reference_block(a, ld, edge(ty0 + y, rows), edge(ty0 + y + 1, rows),
                                                            edge(tx0 + x, cols), edge(tx0 + x + 1, cols), mode, mask);
  return out;
}

TEST(HeatmapGrid, FixedEdgesMatchNestedLoops) {
  std::mt19937 rng(11);
  const int N = 211;
  const std::vector<float> a = random_matrix(N, N, rng, true);
  int checked = 0;
  for (double s : {1.0, 1.05, 1.1025, 2.0, 2.0789, 3.3, 7.0})
    for (CellRect src : {CellRect{0, N, 0, N}, CellRect{17, 150, 3, 99}, CellRect{200, 211, 0, 5}})
      for (PoolMode mode : {PoolMode::Max, PoolMode::Extreme})
        for (PoolMask mask : {PoolMask{}, PoolMask{true, 0}, PoolMask{true, 9}}) {
          PoolGrid g;
          pool_grid(a.data(), N, N, 0, src, s, mode, mask, g);
          ASSERT_EQ(g.s, s);
          // The grid holds exactly the texels whose blocks meet src.
          EXPECT_LE(grid_edge(s, g.ty0), src.r0);
          EXPECT_GT(grid_edge(s, g.ty0 + 1), src.r0);
          EXPECT_LT(grid_edge(s, g.ty0 + g.h - 1), src.r1);
          EXPECT_GE(grid_edge(s, g.ty0 + g.h), src.r1);
          EXPECT_LE(grid_edge(s, g.tx0), src.c0);
          EXPECT_GE(grid_edge(s, g.tx0 + g.w), src.c1);
          EXPECT_TRUE(g.cells().contains(src));
          expect_same(g.values, reference_grid(a, N, N, N, s, g.ty0, g.h, g.tx0, g.w, mode, mask),
                      "s " + std::to_string(s) + " src " + std::to_string(src.r0) + " mode " +
                          std::to_string(static_cast<int>(mode)) + " window " + std::to_string(mask.window));
          ++checked;
        }
  EXPECT_EQ(checked, 7 * 3 * 2 * 3);
  // texel k holds cell c exactly when edge(k) ≤ c < edge(k + 1)
  for (double s : {1.0, 1.05, 2.0, 2.0789, 13.7})
    for (int c = 0; c < 500; ++c) {
      const int k = grid_texel(s, c);
      ASSERT_LE(grid_edge(s, k), c);
      ASSERT_GT(grid_edge(s, k + 1), c);
    }
}

TEST(HeatmapGrid, ScaleGivesTexelsOfOneToOnePointOFivePixelsAndHoldsWhileTheZoomDrifts) {
  EXPECT_EQ(grid_scale(1.f), 1.0);
  EXPECT_EQ(grid_scale(7.5f), 1.0);
  for (float zoom = 0.999f; zoom > 0.01f; zoom *= 0.987f) {
    const double s = grid_scale(zoom), px = s * zoom;
    ASSERT_GE(px, 1.0 - 1e-6) << zoom;
    ASSERT_LT(px, 1.05 + 1e-6) << zoom;
  }
  // The fit zoom of a 2000-token text on 1000 pixels, then 10 more tokens: the same s for
  // most of them (it changes only where 1 / zoom crosses a step of the ladder).
  int changes = 0;
  for (int T = 2000; T < 2010; ++T) changes += grid_scale(1000.f / static_cast<float>(T + 1)) != grid_scale(1000.f / T);
  EXPECT_LE(changes, 1);
}

// A typed token adds a row and a column to the (T, T) weights, rows before it unchanged; an
// edit changes the rows from its token on; backspace removes the last. The grid updated in
// place equals a grid pooled afresh, texel for texel, and re-pools only the texel rows from
// the change on.
TEST(HeatmapGrid, UpdatesInPlaceMatchAFreshGridWhileTyping) {
  std::mt19937 rng(3);
  const int N = 400;
  std::vector<float> a = random_matrix(N, N, rng, true);
  for (double s : {1.0, 1.05, 2.0789, 3.3})
    for (PoolMode mode : {PoolMode::Max, PoolMode::Extreme})
      for (PoolMask mask : {PoolMask{true, 0}, PoolMask{true, 20}})
        for (bool whole : {true, false}) {  // the whole matrix (the fit zoom) or a zoomed-in part
          int T = 300;
          PoolGrid g;
          const CellRect src = whole ? CellRect{0, T, 0, T} : CellRect{60, 140, 90, 200};
          pool_grid(a.data(), T, T, N, src, s, mode, mask, g);
          std::uniform_int_distribution<int> edit(0, 40);
          for (int step = 0; step < 40; ++step) {
            int from = T;
            if (step % 7 == 3) {  // an edit: the rows from a token on change
              from = T - 1 - edit(rng);
              for (int i = from; i < N; ++i)
                for (int j = 0; j < N; ++j) a[static_cast<size_t>(i) * N + j] = std::normal_distribution<float>()(rng);
            } else if (step % 7 == 5) {  // backspace
              --T;
              from = T;
            } else {
              ++T;
              from = T - 1;
            }
            const int old_ty0 = g.ty0;
            int y0 = -1, y1 = -1;
            bool resized = false;
            ASSERT_TRUE(pool_grid_update(a.data(), T, T, N, from, g, &y0, &y1, &resized));
            ASSERT_EQ(g.ty0, old_ty0);
            ASSERT_EQ(y1, g.h);
            EXPECT_EQ(y0, std::clamp(grid_texel(s, std::min(from, T)) - g.ty0, 0, g.h)) << "step " << step;
            const std::string what = "s " + std::to_string(s) + " T " + std::to_string(T) + " whole " +
                                     std::to_string(whole) + " window " + std::to_string(mask.window);
            if (whole) {  // the grid follows the matrix's end
              EXPECT_EQ(g.cells(), (CellRect{0, T, 0, T})) << what;
            }
            PoolGrid fresh;
            pool_grid(a.data(), T, T, N, g.cells(), s, mode, mask, fresh);
            ASSERT_EQ(fresh.ty0, g.ty0) << what;
            ASSERT_EQ(fresh.tx0, g.tx0) << what;
            ASSERT_EQ(fresh.h, g.h) << what;
            ASSERT_EQ(fresh.w, g.w) << what;
            expect_same(g.values, fresh.values, what);
          }
        }
}

TEST(HeatmapGrid, ColumnsThatComeWithoutACausalMaskAreRefused) {
  std::mt19937 rng(5);
  const std::vector<float> a = random_matrix(50, 64, rng, false);
  PoolGrid g;
  pool_grid(a.data(), 40, 40, 64, CellRect{0, 40, 0, 40}, 1.5, PoolMode::Extreme, PoolMask{}, g);
  const PoolGrid before = g;
  int y0 = 0, y1 = 0;
  bool resized = false;
  EXPECT_FALSE(pool_grid_update(a.data(), 41, 41, 64, 40, g, &y0, &y1, &resized));  // the old rows' new cells count
  EXPECT_EQ(g.values, before.values);
  EXPECT_EQ(g.w, before.w);
  // Rows alone (Q, K, V: (T, d)) grow in place without a mask.
  pool_grid(a.data(), 40, 64, 64, CellRect{0, 40, 0, 64}, 1.5, PoolMode::Extreme, PoolMask{}, g);
  ASSERT_TRUE(pool_grid_update(a.data(), 45, 64, 64, 40, g, &y0, &y1, &resized));
  PoolGrid fresh;
  pool_grid(a.data(), 45, 64, 64, CellRect{0, 45, 0, 64}, 1.5, PoolMode::Extreme, PoolMask{}, fresh);
  expect_same(g.values, fresh.values, "rows alone");
  PoolGrid none;
  EXPECT_FALSE(pool_grid_update(a.data(), 45, 64, 64, 0, none, &y0, &y1, &resized));  // nothing held
}

TEST(HeatmapPool, OneStrongCellSurvivesAnyShrink) {
  const int n = 4095;
  std::vector<float> a(static_cast<size_t>(n) * n, 0.01f);
  a[static_cast<size_t>(2999) * n + 17] = 0.9f;
  std::vector<float> got;
  int h = 0, w = 0;
  pool_cells(a.data(), n, n, {0, n, 0, n}, 300, 300, PoolMode::Max, PoolMask{true, 0}, got, &h, &w);
  ASSERT_EQ(h, 300);
  int strong = 0;
  for (float v : got) strong += v == 0.9f;
  EXPECT_EQ(strong, 1);
  EXPECT_EQ(got[static_cast<size_t>(2999 * 300 / n) * 300 + 17 * 300 / n], 0.9f);
}

TEST(HeatmapPool, ExtremeKeepsTheSignOfTheLargestMagnitude) {
  const std::vector<float> a = {0.5f, -3.f, 2.f, NAN, -kInf, 1.f};  // (1, 6)
  std::vector<float> got;
  pool_cells(a.data(), 1, 6, {0, 1, 0, 6}, 1, 2, PoolMode::Extreme, {}, got);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], -3.f);
  EXPECT_EQ(got[1], 1.f);
  pool_cells(a.data(), 1, 6, {0, 1, 0, 6}, 1, 2, PoolMode::Max, {}, got);
  EXPECT_EQ(got[0], 2.f);
  EXPECT_EQ(got[1], 1.f);
}

TEST(HeatmapPool, FullyMaskedBlocksAreMinusInfAndKnowTheWindow) {
  const int n = 8;
  std::vector<float> a(n * n, 0.25f);
  std::vector<float> got;
  // A 2×2 grid of 4×4 blocks: the top-right block is all future.
  pool_cells(a.data(), n, n, {0, n, 0, n}, 2, 2, PoolMode::Max, PoolMask{true, 0}, got);
  EXPECT_EQ(got[1], -kInf);
  EXPECT_EQ(got[0], 0.25f);
  // Window 2: row 4 still sees key 3, so the bottom-left block (rows 4…7, cols 0…3) pools
  // a value; window 1: that block is all hidden by the window.
  pool_cells(a.data(), n, n, {0, n, 0, n}, 2, 2, PoolMode::Max, PoolMask{true, 2}, got);
  EXPECT_EQ(got[2], 0.25f);
  pool_cells(a.data(), n, n, {0, n, 0, n}, 2, 2, PoolMode::Max, PoolMask{true, 1}, got);
  EXPECT_EQ(got[2], -kInf);
  EXPECT_TRUE(block_outside_window(texel_block({0, n, 0, n}, 2, 2, 1, 0), 1));
  EXPECT_FALSE(block_outside_window(texel_block({0, n, 0, n}, 2, 2, 0, 1), 1));  // the future block
  EXPECT_FALSE(block_outside_window(texel_block({0, n, 0, n}, 2, 2, 1, 0), 0));  // a global layer
}

TEST(HeatmapPool, BadInputGivesAnEmptyGridNotACrash) {
  std::vector<float> got = {1.f};
  int h = -1, w = -1;
  pool_cells(nullptr, 4, 4, {0, 4, 0, 4}, 2, 2, PoolMode::Max, {}, got, &h, &w);
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(h, 0);
  const std::vector<float> a(12, 1.f);                                             // (3, 4)
  pool_cells(a.data(), 3, 4, {5, 9, 0, 4}, 2, 2, PoolMode::Max, {}, got, &h, &w);  // rows past the end
  EXPECT_TRUE(got.empty());
  pool_cells(a.data(), 3, 4, {-3, 99, -1, 99}, 1000, 0, PoolMode::Max, {}, got, &h, &w);  // clipped, h, w clamped
  EXPECT_EQ(h, 3);
  EXPECT_EQ(w, 1);
  EXPECT_EQ(got.size(), 3u);
}

TEST(HeatmapPool, TexelGridIsExactAtAPixelPerCellOrMore) {
  int h = 0, w = 0;
  texel_grid({10, 4000, 0, 4096}, 1.f, &h, &w);
  EXPECT_EQ(h, 3990);
  EXPECT_EQ(w, 4096);
  texel_grid({0, 4096, 0, 4096}, 0.25f, &h, &w);
  EXPECT_EQ(h, 1024);
  EXPECT_EQ(w, 1024);
  texel_grid({0, 4095, 0, 1}, 0.1f, &h, &w);
  EXPECT_EQ(h, 410);  // ⌈409.5⌉
  EXPECT_EQ(w, 1);
  // Exact grids: each texel's block is exactly its cell.
  const CellRect src{3, 20, 5, 9};
  texel_grid(src, 2.5f, &h, &w);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const CellRect b = texel_block(src, h, w, y, x);
      EXPECT_EQ(b, (CellRect{src.r0 + y, src.r0 + y + 1, src.c0 + x, src.c0 + x + 1}));
    }
}

HeatmapView view_of(int rows, int cols, float vw, float vh) {
  HeatmapView v;
  const float fit = std::min(vw / static_cast<float>(cols), vh / static_cast<float>(rows));
  set_frame(v, rows, cols, vw, vh, fit);
  return v;
}

TEST(HeatmapView, ZoomAboutAPointKeepsThatPointFixed) {
  HeatmapView v = view_of(4096, 4096, 900.f, 800.f);
  EXPECT_FLOAT_EQ(v.zoom, 800.f / 4096.f);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> px(0.f, 900.f), py(0.f, 800.f), f(0.6f, 1.9f);
  int moved = 0;
  for (int step = 0; step < 200; ++step) {
    const float x = px(rng), y = py(rng);
    const float cx = v.cell_x(x), cy = v.cell_y(y);
    const float before = v.zoom;
    const float want = before * f(rng);
    HeatmapView u = v;
    zoom_at(v, want, x, y);
    // Where nothing clamps the offsets, the cell under the cursor stays under it.
    const float nx0 = cx - x / v.zoom, ny0 = cy - y / v.zoom;
    const bool free_x = nx0 >= 0.f && nx0 + v.vw / v.zoom <= 4096.f && v.zoom * 4096.f > v.vw;
    const bool free_y = ny0 >= 0.f && ny0 + v.vh / v.zoom <= 4096.f && v.zoom * 4096.f > v.vh;
    if (free_x) {
      EXPECT_NEAR(v.cell_x(x), cx, 1e-3f * std::max(1.f, 1.f / v.zoom)) << step;
    }
    if (free_y) {
      EXPECT_NEAR(v.cell_y(y), cy, 1e-3f * std::max(1.f, 1.f / v.zoom)) << step;
    }
    moved += free_x && free_y && v.zoom != u.zoom;
    EXPECT_GE(v.zoom, v.fit);
    EXPECT_LE(v.zoom, kMaxCellPx);
  }
  EXPECT_GT(moved, 50);  // most steps checked the fixed point
}

TEST(HeatmapView, ZoomInAtTheCentreKeepsTheCentreCell) {
  HeatmapView v = view_of(501, 501, 500.f, 500.f);
  zoom_at(v, 10.f, 250.f, 250.f);
  EXPECT_FLOAT_EQ(v.zoom, 10.f);
  EXPECT_NEAR(v.cell_x(250.f), 250.5f, 1e-3f);
  EXPECT_NEAR(v.cell_y(250.f), 250.5f, 1e-3f);
  int i = -1, j = -1;
  ASSERT_TRUE(cell_at(v, 250.f, 250.f, &i, &j));
  EXPECT_EQ(i, 250);
  EXPECT_EQ(j, 250);
}

TEST(HeatmapView, ClampingHoldsAtTheLimits) {
  HeatmapView v = view_of(300, 200, 600.f, 400.f);
  const float fit = v.fit;
  zoom_at(v, 1e9f, 10.f, 10.f);
  EXPECT_EQ(v.zoom, kMaxCellPx);
  zoom_at(v, 0.f, 10.f, 10.f);  // past the least zoom: fit, the whole matrix at the corner
  EXPECT_EQ(v.zoom, fit);
  EXPECT_EQ(v.x0, 0.f);
  EXPECT_EQ(v.y0, 0.f);
  zoom_at(v, -5.f, 1.f, 1.f);
  EXPECT_EQ(v.zoom, fit);
  zoom_at(v, std::nanf(""), 1.f, 1.f);
  EXPECT_EQ(v.zoom, fit);
  zoom_at(v, 20.f, 300.f, 200.f);
  pan_by(v, 1e7f, 1e7f);  // dragged far right and down: the top-left corner
  EXPECT_EQ(v.x0, 0.f);
  EXPECT_EQ(v.y0, 0.f);
  pan_by(v, -1e7f, -1e7f);  // far the other way: the bottom-right corner, no space past it
  EXPECT_FLOAT_EQ(v.x0 + v.vw / v.zoom, 200.f);
  EXPECT_FLOAT_EQ(v.y0 + v.vh / v.zoom, 300.f);
  center_on(v, -50.f, 1e6f);
  EXPECT_EQ(v.x0, 0.f);
  EXPECT_FLOAT_EQ(v.y0 + v.vh / v.zoom, 300.f);
  fit_view(v);
  EXPECT_FALSE(v.zoomed());
  // A tiny matrix that fits larger than the maximum: fit is both limits.
  HeatmapView t = view_of(3, 3, 600.f, 600.f);
  zoom_at(t, 1000.f, 5.f, 5.f);
  EXPECT_EQ(t.zoom, 200.f);
  EXPECT_EQ(t.x0, 0.f);
}

TEST(HeatmapView, VisibleRangeAtFullZoomMapsEachCellExactly) {
  HeatmapView v = view_of(4096, 4096, 640.f, 512.f);
  zoom_at(v, kMaxCellPx, 0.f, 0.f);
  center_on(v, 1000.f, 2000.f);
  ASSERT_EQ(v.zoom, kMaxCellPx);
  const CellRect r = visible_cells(v);
  EXPECT_EQ(r.cols(), 640 / 64);
  EXPECT_EQ(r.rows(), 512 / 64);
  EXPECT_EQ(r.c0, 1000 - 5);
  EXPECT_EQ(r.r0, 2000 - 4);
  int h = 0, w = 0;
  texel_grid(r, v.zoom, &h, &w);
  EXPECT_EQ(h, r.rows());
  EXPECT_EQ(w, r.cols());
  // Every pixel centre lands in the cell whose screen square holds it, and every cell in view
  // gets exactly 64 × 64 of them.
  std::vector<int> count(static_cast<size_t>(r.rows()) * r.cols(), 0);
  for (int y = 0; y < 512; ++y)
    for (int x = 0; x < 640; ++x) {
      int i = -1, j = -1;
      ASSERT_TRUE(cell_at(v, x + 0.5f, y + 0.5f, &i, &j));
      ASSERT_GE(i, r.r0);
      ASSERT_LT(i, r.r1);
      ASSERT_GE(j, r.c0);
      ASSERT_LT(j, r.c1);
      EXPECT_LE(v.py_of(static_cast<float>(i)), y + 0.5f);
      EXPECT_GT(v.py_of(static_cast<float>(i + 1)), y + 0.5f);
      ++count[static_cast<size_t>(i - r.r0) * r.cols() + (j - r.c0)];
    }
  for (int c : count) EXPECT_EQ(c, 64 * 64);
  // At one pixel per cell, the visible range is as wide as the viewport.
  zoom_at(v, 1.f, 0.f, 0.f);
  const CellRect one = visible_cells(v);
  EXPECT_EQ(one.cols(), 640);
  EXPECT_EQ(one.rows(), 512);
}

TEST(HeatmapView, VisibleRangeCoversPartCellsAndStaysInTheMatrix) {
  HeatmapView v = view_of(100, 100, 300.f, 300.f);
  zoom_at(v, 7.f, 150.f, 150.f);
  pan_by(v, -3.5f, -3.5f);  // half a cell: a part cell at each edge
  const CellRect r = visible_cells(v);
  EXPECT_EQ(r.c0, static_cast<int>(std::floor(v.x0)));
  EXPECT_EQ(r.c1, static_cast<int>(std::ceil(v.x0 + 300.f / 7.f)));
  EXPECT_LE(r.r1, 100);
  HeatmapView empty;
  EXPECT_TRUE(visible_cells(empty).empty());
  int i = 0, j = 0;
  EXPECT_FALSE(cell_at(v, -1000.f, 5.f, &i, &j));
}

TEST(HeatmapView, ResizingKeepsTheZoomAndTheCentre) {
  HeatmapView v = view_of(1000, 1000, 500.f, 500.f);
  zoom_at(v, 8.f, 250.f, 250.f);
  center_on(v, 400.f, 600.f);
  set_frame(v, 1000, 1000, 700.f, 300.f, 0.3f);
  EXPECT_EQ(v.zoom, 8.f);
  EXPECT_NEAR(v.cell_x(350.f), 400.f, 1e-3f);
  EXPECT_NEAR(v.cell_y(150.f), 600.f, 1e-3f);
  // At fit, a grown matrix (one more token typed) stays fitted.
  HeatmapView f = view_of(50, 50, 500.f, 500.f);
  set_frame(f, 51, 51, 500.f, 500.f, 500.f / 51.f);
  EXPECT_FALSE(f.zoomed());
  EXPECT_EQ(f.zoom, 500.f / 51.f);
}

TEST(HeatmapGoTo, ParsesNumbersAndSaysWhatIsWrong) {
  int i = -1;
  std::string msg;
  EXPECT_TRUE(parse_token_index(" 42 ", 100, &i, &msg));
  EXPECT_EQ(i, 42);
  EXPECT_TRUE(parse_token_index("0", 1, &i, &msg));
  EXPECT_EQ(i, 0);
  EXPECT_FALSE(parse_token_index("100", 100, &i, &msg));
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  EXPECT_NE(msg.find("99"), std::string::npos) << msg;
  EXPECT_FALSE(parse_token_index("-1", 100, &i, &msg));
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  EXPECT_FALSE(parse_token_index("abc", 100, &i, &msg));
  EXPECT_NE(msg.find("not a token number"), std::string::npos) << msg;
  EXPECT_FALSE(parse_token_index("", 100, &i, &msg));
  EXPECT_FALSE(parse_token_index("12x", 100, &i, &msg));
  EXPECT_FALSE(parse_token_index("99999999999999999999999", 100, &i, &msg));
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  EXPECT_FALSE(parse_token_index("3", 0, &i, &msg));
  EXPECT_NE(msg.find("no tokens"), std::string::npos) << msg;
  EXPECT_EQ(i, 0);  // untouched by the failures
}

}  // namespace
}  // namespace attnviz::ui
