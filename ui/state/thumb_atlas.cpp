#include "ui/state/thumb_atlas.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/engine/head_summary.h"
#include "ui/state/heatmap_view.h"
#include "ui/state/window_paint.h"

namespace attnviz::ui {

namespace {
// The side of a layer's thumbnails: its pooled thumbnail's, else the whole matrix pooled to
// at most kThumbCells.
int thumb_side(const Trace& tr, const LayerTrace& lt) {
  return !lt.thumbs.shape.empty() ? static_cast<int>(lt.thumbs.dim(1)) : std::min(tr.T(), kThumbCells);
}
}  // namespace

int grid_columns(const ModelConfig& c) {
  int n = 0;
  for (int l = 0; l < c.n_layer; ++l) n = std::max(n, c.heads_at(l));
  return n;
}

void ThumbAtlasImage::slot_origin(int l, int h, int* x, int* y) const {
  const int k = l * W_ + h;
  *x = (k % per_row_) * n_, *y = (k / per_row_) * n_;
}

// Colours rows [y0, y1) of head (l, h)'s slot from shown_ (what it shows) into rgba_.
void ThumbAtlasImage::colour_head(const Trace& tr, int l, int h, int y0, int y1) {
  const LayerTrace& lt = tr.layers[l];
  const int k = l * W_ + h, n = n_, stride = width();             // texels a row of the image
  const float* v = shown_.data() + static_cast<size_t>(k) * n * n;  // (n, n)
  ValueRange range{0.f, 1.f, true};
  if (lt.mixer == Mixer::GatedDeltaNet) {  // |A|, 0 to the head's largest (A is no distribution)
    float top = 0.f;
    for (int i = 0; i < n * n; ++i) top = std::max(top, v[i]);
    range = ValueRange{0.f, top > 0.f ? top : 1.f, true};
  }
  int sx = 0, sy = 0;
  slot_origin(l, h, &sx, &sy);
  uint8_t* slot = rgba_.data() + (static_cast<size_t>(sy) * stride + static_cast<size_t>(sx)) * 4;
  for (int y = y0; y < y1; ++y)
    colorize_rows(cmap_, v + static_cast<size_t>(y) * n, y, 1, n, range, slot + static_cast<size_t>(y) * stride * 4,
                  /*causal_mask=*/true);
  if (lt.mixer == Mixer::Softmax && lt.window > 0) {
    // tokens a slot's cell covers: the thumbnail's bucket, or about T / n where pooled here
    const int bucket = !lt.thumbs.shape.empty() ? std::max(lt.thumb_bucket, 1) : std::max(1, (tr.T() + n - 1) / n);
    paint_outside_window_rows(slot + static_cast<size_t>(y0) * stride * 4, y0, y1 - y0, n, lt.window, bucket, stride);
  }
}

bool ThumbAtlasImage::update(const Trace& tr, const ModelConfig& c, Colormap cmap,
                             std::vector<std::pair<int, int>>* bands) {
  const int L = static_cast<int>(tr.layers.size()), W = std::max(grid_columns(c), 1);
  int n = 1;
  for (const LayerTrace& lt : tr.layers) n = std::max(n, thumb_side(tr, lt));
  const bool all = !laid_out_ || n != n_ || W != W_ || L != L_ || cmap != cmap_;
  if (all) {
    n_ = n, W_ = W, L_ = L, cmap_ = cmap, laid_out_ = true;
    per_row_ = std::max(1, std::min(L_ * W_, kAtlasSide / n_));
    shown_.assign(static_cast<size_t>(L_) * W_ * n_ * n_, 0.f);
    rgba_.assign(static_cast<size_t>(height()) * width() * 4, 0);
    bucket_.assign(static_cast<size_t>(L_), -1);
    window_.assign(static_cast<size_t>(L_), -1);
  }
  std::vector<int> band_y0(static_cast<size_t>(rows_of_slots()), n_), band_y1(static_cast<size_t>(rows_of_slots()), 0);
  std::vector<float> now;  // (n, n) a head's thumbnail now
  for (int l = 0; l < L_; ++l) {
    const LayerTrace& lt = tr.layers[l];
    const int heads = std::min(W_, c.heads_at(l));
    const bool layer_all = all || lt.thumb_bucket != bucket_[l] || lt.window != window_[l];
    bucket_[l] = lt.thumb_bucket, window_[l] = lt.window;
    const int side = thumb_side(tr, lt);
    for (int h = 0; h < heads; ++h) {
      const int k = l * W_ + h;
      float* shown = shown_.data() + static_cast<size_t>(k) * n_ * n_;
      now.assign(static_cast<size_t>(n_) * n_, -std::numeric_limits<float>::infinity());  // a smaller side: the rest masked
      if (!lt.thumbs.shape.empty()) {
        for (int y = 0; y < side; ++y)
          std::copy_n(lt.thumbs.head(h) + static_cast<size_t>(y) * side, side, now.data() + static_cast<size_t>(y) * n_);
      } else {
        const bool linear = lt.mixer == Mixer::GatedDeltaNet;
        const float* a = lt.head_values(linear ? Stage::Implicit : Stage::Probs, h, dense_);  // (T, T)
        const int T = tr.T();
        std::vector<float> mag, pooled;
        if (linear) {  // |A|
          mag.assign(a, a + static_cast<size_t>(T) * T);
          for (float& x : mag) x = std::fabs(x);
          a = mag.data();
        }
        int ph = 0, pw = 0;
        pool_cells(a, T, T, CellRect{0, T, 0, T}, side, side, PoolMode::Max, PoolMask{true, linear ? 0 : lt.window},
                   pooled, &ph, &pw);
        for (int y = 0; y < ph; ++y)
          std::copy_n(pooled.data() + static_cast<size_t>(y) * pw, pw, now.data() + static_cast<size_t>(y) * n_);
      }
      int y0 = 0, y1 = n_;  // the rows that changed (a linear layer's range moves: all of them)
      if (!layer_all && lt.mixer != Mixer::GatedDeltaNet) {
        y0 = n_, y1 = 0;
        for (int y = 0; y < n_; ++y)
          if (std::memcmp(now.data() + static_cast<size_t>(y) * n_, shown + static_cast<size_t>(y) * n_, sizeof(float) * n_)) {
            y0 = std::min(y0, y);
            y1 = y + 1;
          }
      }
      if (y0 >= y1) continue;
      std::copy(now.begin() + static_cast<ptrdiff_t>(y0) * n_, now.begin() + static_cast<ptrdiff_t>(y1) * n_,
                shown + static_cast<ptrdiff_t>(y0) * n_);
      colour_head(tr, l, h, y0, y1);
      const int band = k / per_row_;
      band_y0[band] = std::min(band_y0[band], y0), band_y1[band] = std::max(band_y1[band], y1);
    }
  }
  if (bands) {
    bands->clear();
    if (!all)
      for (int b = 0; b < rows_of_slots(); ++b)
        if (band_y0[b] < band_y1[b]) bands->emplace_back(b * n_ + band_y0[b], b * n_ + band_y1[b]);
  }
  return all;
}

}  // namespace attnviz::ui
