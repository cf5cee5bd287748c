// Two prompts side by side: the selected layer and head's attention weights on prompt A
// (the text), on prompt B (the other prompt, typed under the text in Text & model and run
// through the same model by a second Worker), or A − B in the diverging colour map, aligned
// by window position from the start. When the token counts differ the panel says so and
// compares the first min(Ta, Tb) positions. Hover a cell for both weights and both tokens.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ui/panels/panel.h"
#include "ui/draw/texture.h"

namespace attnviz::ui {

class ComparePanel : public Panel {
 public:
  ComparePanel() : Panel("Compare prompts", /*open=*/false) {}
  // Prompt B's newest answer (App sets it every frame; null while there is no other prompt).
  void set_other(std::shared_ptr<const Snapshot> other) { other_ = std::move(other); }
  ImVec4 matrix_rect() const { return matrix_rect_; }  // (x, y, w, h) of the matrix drawn last frame
  // What the panel showed last frame, for the screenshot's sidecar.
  struct Shown {
    int ta = 0, tb = 0, n = 0;   // tokens of A and B in their windows, positions compared
    CompareView view = CompareView::Difference;
    float max_abs_diff = -1.f;   // max |A − B| over the (n, n) block; −1 when nothing is shown
    std::string message;         // why nothing (or not everything) is compared
  };
  const Shown& shown() const { return shown_; }

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  // The (n, n) values of the view and their texture, recomputed when the key changes.
  void upload_if_changed(const FrameContext& ctx, const Trace& b);
  void draw_matrix(FrameContext& ctx, const Trace& b);

  std::shared_ptr<const Snapshot> other_;
  CompareView view_ = CompareView::Difference;
  struct Key {
    uint64_t a_serial = 0, b_serial = 0;
    int layer = -1, head = -1;
    CompareView view = CompareView::A;
    Colormap cmap = Colormap::Viridis;
    bool operator==(const Key& o) const {
      return a_serial == o.a_serial && b_serial == o.b_serial && layer == o.layer && head == o.head && view == o.view &&
             cmap == o.cmap;
    }
  } key_;
  std::vector<float> a_values_, b_values_;  // (n, n) A's and B's weights, for the hover
  std::vector<float> scratch_a_, scratch_b_, shown_values_;
  std::vector<uint8_t> rgba_;
  ValueRange range_;
  float max_abs_diff_ = 0.f;  // max |A − B| of the block uploaded
  Texture tex_;
  ImVec4 matrix_rect_{0, 0, 0, 0};
  Shown shown_;
};

}  // namespace attnviz::ui
