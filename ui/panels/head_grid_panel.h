// Every layer × head as a small softmax heatmap; click one to select it, right-click to
// ablate it (marked with a red cross). Query heads that share one KV head (GQA) carry the
// same frame colour and sit under one group bar.
#pragma once
#include <vector>

#include "core/engine/head_scores.h"
#include "ui/panels/export_box.h"
#include "ui/panels/panel.h"
#include "ui/draw/texture.h"

namespace attnviz::ui {

// Every head's thumbnail in one texture (an atlas of n × n slots, n the thumbnails' side,
// slot k = l · W + h in rows of slots), so that a keystroke uploads a few bands of rows
// instead of one texture per head, and the grid's images draw in one call. Of a trace's
// pooled thumbnails (LayerTrace::thumbs) only the rows that differ from the last ones shown
// are coloured and uploaded again (after a keystroke, the last row of each); all of them
// when the colormap, the size, the pooling or a window changes. A linear layer's |A| is
// coloured from 0 to its head's largest, so its heads are recoloured whole. A layer without
// thumbnails (a trace recorded without summaries) is max-pooled from its (T, T) weights.
class ThumbAtlas {
 public:
  // Brings the atlas to the trace's thumbnails: grid_columns(c) slots per layer (heads
  // beyond a layer's own stay empty).
  void show(const Trace& tr, const ModelConfig& c, Colormap cmap);
  ImTextureID id() const { return tex_.id(); }
  // The slot of (layer, head) in texture coordinates: uv0 and uv1.
  void uv(int l, int h, ImVec2* uv0, ImVec2* uv1) const;
  int uploads() const { return uploads_; }  // glTexSubImage / glTexImage calls so far

 private:
  void colour_head(const Trace& tr, int l, int h, int y0, int y1);  // rows [y0, y1) of its slot
  Texture tex_;
  int n_ = 0, W_ = 0, L_ = 0, per_row_ = 1;  // slot side, slots per layer, layers, slots per texture row
  std::vector<int> bucket_, window_;         // (L) the pooling and window each layer's slots show
  std::vector<float> shown_;                 // (L · W, n, n) the values on the texture
  std::vector<uint8_t> rgba_;                // the texture: (rows of slots · n, per_row · n, 4)
  std::vector<float> dense_;                 // scratch: a head's (T, T) weights
  Colormap cmap_ = Colormap::Viridis;
  int uploads_ = 0;
};

class HeadGridPanel : public Panel {
 public:
  HeadGridPanel() : Panel("All heads (softmax)") {}
  ImVec4 grid_rect() const { return grid_rect_; }

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  struct GridLayout {
    ImVec2 o;                                    // top-left of the grid
    float row_label = 0, head_row = 0, gap = 0;  // layer-label column, head-number row, spacing
    float side = 0;                              // thumbnail side
  };
  void refresh(const FrameContext& ctx);  // thumbnails and scores of a new trace or colormap
  void draw_header(const FrameContext& ctx, const GridLayout& g) const;
  void draw_ablation_controls(FrameContext& ctx);
  void draw_thumbnail(FrameContext& ctx, int l, int h, ImVec2 a, float side);
  void draw_layer_label(const FrameContext& ctx, int l, ImVec2 a, ImVec2 b) const;

  uint64_t serial_ = 0;            // trace the textures show
  Colormap cmap_ = Colormap::Viridis;
  ThumbAtlas atlas_;               // every head's thumbnail
  size_t shown_count_ = 0;         // layers × grid columns the atlas was last brought up to
  std::vector<HeadScore> scores_;  // (L * H) what each head does on the current text
  ImVec4 grid_rect_{0, 0, 0, 0};
  ExportBox export_{"attnviz-all-heads.png"};
};

// Uploads the softmax of (layer, head) as a texture, masked cells grey: the whole (T, T)
// matrix, or for a compact trace its max-pooled thumbnail (LayerTrace::thumbs, at most
// 64 × 64), so that no head is recomputed. A linear layer's head shows |A| from 0 to its
// largest (its thumbnail, or the whole matrix). Shared by the panels that show thumbnails.
// The most heads any layer has: the grid's columns.
int grid_columns(const ModelConfig& c);

void upload_probs(Texture& tex, const Trace& tr, int layer, int head, Colormap cmap, std::vector<uint8_t>& scratch);

}  // namespace attnviz::ui
