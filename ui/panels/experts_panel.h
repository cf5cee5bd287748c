// Experts (GPT-OSS's mixture of experts): for the selected layer, a token × expert grid of
// the weights the router gave (each token's K chosen experts coloured by weight, the rest
// empty), each expert's load over the text above it (the share of tokens that chose it and
// its mean weight), and on hover a token's experts with their weights and router logits.
// Reads LayerTrace::router, experts and expert_weights; says so when the model has none.
#pragma once
#include "ui/panels/panel.h"

namespace attnviz::ui {

class ExpertsPanel : public Panel {
 public:
  ExpertsPanel() : Panel("Experts", /*open=*/false) {}
  ImVec4 grid_rect() const { return grid_rect_; }  // (x, y, w, h) of the grid drawn last frame

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  ImVec4 grid_rect_{0, 0, 0, 0};
};

}  // namespace attnviz::ui
