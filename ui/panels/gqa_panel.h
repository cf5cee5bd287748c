// Grouped-query attention: which query heads read which KV head (h → h / (H/KV)), the
// group size, the KV-cache memory for the current text and at full context for MHA, this
// model and MQA (with the formula, and a worked 16.4 MB vs 4.1 MB example at 1000 tokens), and
// the selected KV group's query heads side by side: same K and V, different weights. For a
// hybrid (Qwen3.5, LFM2), the softmax layers' growing cache beside the fixed state of its
// linear or convolution layers.
#pragma once
#include <vector>

#include "ui/panels/panel.h"
#include "ui/draw/texture.h"

namespace attnviz::ui {

class GqaPanel : public Panel {
 public:
  GqaPanel() : Panel("GQA & KV cache") {}

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  void draw_diagram(FrameContext& ctx);
  void draw_memory(FrameContext& ctx);
  void draw_state_vs_cache(FrameContext& ctx);
  void draw_group(FrameContext& ctx);

  // Textures of the selected group's heads (probs) for (serial_, layer_, group_).
  uint64_t serial_ = 0;
  int layer_ = -1, group_ = -1;
  Colormap cmap_ = Colormap::Viridis;
  std::vector<Texture> heads_;
  std::vector<uint8_t> rgba_;
};

}  // namespace attnviz::ui
