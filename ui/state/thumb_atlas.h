// Every head's attention thumbnail in one RGBA image, without ImGui or GL: the head grid
// uploads it as one texture (ui/panels/head_grid_panel.h). Slots of n × n texels, n the
// thumbnails' side; slot k = l · W + h (W = grid_columns) in rows of slots as wide as
// kAtlasSide allows. Unit-tested in tests/test_thumb_atlas.cpp.
//
// A slot shows the trace's pooled thumbnail (LayerTrace::thumbs), coloured as the heatmap
// colours probs (masked cells by position, a local layer's hidden keys in their brown); a
// linear layer's |A| from 0 to its head's largest. A layer without thumbnails (a trace
// recorded without summaries) is max-pooled here from its (T, T) matrix.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/engine/trace.h"
#include "core/export/colormap.h"
#include "core/model/config.h"

namespace attnviz::ui {

constexpr int kAtlasSide = 8192;  // texels: within every GL's texture size limit

// The most heads any layer has: the head grid's columns (a hybrid's linear layers may have
// more value heads than its softmax layers have query heads).
int grid_columns(const ModelConfig& c);

class ThumbAtlasImage {
 public:
  // Brings the image to the trace's thumbnails. Returns true when it was laid out anew
  // (the first trace, another slot size, model shape or colormap: upload all of it); else
  // `bands` receives the texture rows [y0, y1) that changed (after a keystroke: the last row
  // of each head, one range per row of slots).
  bool update(const Trace& tr, const ModelConfig& c, Colormap cmap, std::vector<std::pair<int, int>>* bands);
  int width() const { return per_row_ * n_; }
  int height() const { return rows_of_slots() * n_; }
  int slot_side() const { return n_; }
  // The top-left texel of (layer, head)'s slot.
  void slot_origin(int l, int h, int* x, int* y) const;
  const std::vector<uint8_t>& rgba() const { return rgba_; }  // (height, width, 4)

 private:
  int rows_of_slots() const { return (L_ * W_ + per_row_ - 1) / per_row_; }
  void colour_head(const Trace& tr, int l, int h, int y0, int y1);  // rows [y0, y1) of its slot
  int n_ = 0, W_ = 0, L_ = 0, per_row_ = 1;  // slot side, slots per layer, layers, slots per image row
  bool laid_out_ = false;
  Colormap cmap_ = Colormap::Viridis;
  std::vector<int> bucket_, window_;  // (L) the pooling and window each layer's slots show
  std::vector<float> shown_;          // (L · W, n, n) the values the image shows
  std::vector<uint8_t> rgba_;
  std::vector<float> dense_;  // scratch: a head's (T, T) weights
};

}  // namespace attnviz::ui
