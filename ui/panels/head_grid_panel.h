// Every layer × head as a small softmax heatmap; click one to select it, right-click to
// ablate it (marked with a red cross). Query heads that share one KV head (GQA) carry the
// same frame colour and sit under one group bar.
#pragma once
#include <vector>

#include "core/engine/head_scores.h"
#include "ui/panels/export_box.h"
#include "ui/panels/panel.h"
#include "ui/draw/texture.h"
#include "ui/state/thumb_atlas.h"

namespace attnviz::ui {

// Every head's thumbnail in one texture (ThumbAtlasImage, ui/state/thumb_atlas.h), so that a
// keystroke uploads a few bands of rows instead of one texture per head (336 on a 24 × 14-head
// model), and the grid's images draw in one call.
class ThumbAtlas {
 public:
  void show(const Trace& tr, const ModelConfig& c, Colormap cmap);
  ImTextureID id() const { return tex_.id(); }
  // The slot of (layer, head) in texture coordinates: uv0 and uv1.
  void uv(int l, int h, ImVec2* uv0, ImVec2* uv1) const;

 private:
  ThumbAtlasImage image_;
  Texture tex_;
  std::vector<std::pair<int, int>> bands_;  // scratch: the texture rows that changed
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
void upload_probs(Texture& tex, const Trace& tr, int layer, int head, Colormap cmap, std::vector<uint8_t>& scratch);

}  // namespace attnviz::ui
