// The text itself, wrapped like a document, each token's background shaded by the weight it
// receives from the selected query: for the selected head, or the mean or max over the
// layer's heads or over every layer (a combo). Hover a token to see its weights from it,
// click to select it as the query; ←/→ move the query by a token and ↑/↓ by a line while
// the panel has focus. Tokens after the query are pale (the causal mask), those outside a
// local layer's window brown, those cropped by block_size grey, as in the token strip. It
// scrolls to keep the query and its strongest key in view. One row of weights per change
// (ui/text_view.h, cached), and only the visible lines are drawn: smooth at T = 4096.
// Shade by "logit attribution" instead: each token's share of the logit the query predicts,
// carried to it by the heads' attention (core/engine/lens.h key_attribution, computed on a
// thread of its own), orange for and blue against. Exports the view as a self-contained
// HTML page, an SVG or a PNG.
#pragma once
#include <nlohmann/json.hpp>

#include "ui/panels/export_box.h"
#include "ui/jobs/lens_job.h"
#include "ui/panels/panel.h"
#include "ui/state/text_view.h"

namespace attnviz::ui {

class TextViewPanel : public Panel {
 public:
  TextViewPanel() : Panel("Text view", /*open=*/false) {}
  // The panel had keyboard focus last frame: the arrow keys move its query, not the layer/head.
  bool focused() const { return open() && focused_; }
  ImVec4 text_rect() const { return text_rect_; }  // (x, y, w, h) of the text drawn last frame
  void set_mode(TextViewMode m) { mode_ = m; }
  void set_attribution(bool on) { attribution_ = on; }
  // Shading by logit attribution and its key shares computed for the current trace and query.
  bool attribution_shown() const { return attribution_ && attribution_ready_; }
  // Nothing pending: the last frame showed what it will show (attention weights, or the
  // attribution's key shares or its error).
  bool settled() const { return !attribution_ || attribution_done_; }
  // For the screenshot's sidecar: {"shade_by": "attention" or "attribution", "ready": the
  // shading is the attribution's, "note": what it shows or why not, "query", "strongest":
  // the weight or share of the strongest key (0: none)}.
  nlohmann::json sidecar() const;

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  void draw_controls(FrameContext& ctx, const TextShading& sh, int query);
  // The logit attribution shading of `query` (its key shares once the job has them; every
  // key unshaded before, with attribution_ready_ false).
  const TextShading& attribution_shading(const FrameContext& ctx, int query);
  void draw_export(const FrameContext& ctx, const TextShading& sh, int query);
  void draw_text(FrameContext& ctx, const TextShading& sh);
  // The pieces and their wrapped lines, rebuilt when the text, the font or the width change.
  void update_layout(const FrameContext& ctx, float width);
  void move_query(FrameContext& ctx, int query);
  void token_tooltip(const FrameContext& ctx, const TextShading& sh, int k) const;

  TextViewMode mode_ = TextViewMode::Head;
  TextShadingCache cache_;
  bool attribution_ = false;  // shade by logit attribution, not by attention weights
  AttributionJob attribution_job_;
  bool attribution_ready_ = false;
  bool attribution_done_ = false;  // ready, or failed with a note saying why
  std::string attribution_note_;  // what the shading shows, or why there is none
  // The attribution shading, for (key shares, layer, head, mode).
  struct AttributionKey {
    const KeyAttribution* keys = nullptr;
    int layer = -1, head = -1;
    TextViewMode mode = TextViewMode::Head;
    bool operator==(const AttributionKey& o) const { return keys == o.keys && layer == o.layer && head == o.head && mode == o.mode; }
  } attribution_key_;
  TextShading attribution_sh_;
  const TextShading* shown_ = nullptr;  // the shading drawn last frame
  std::vector<float> shares_;  // (T)
  std::vector<DocPiece> pieces_;  // (N) the text's tokens as the document shows them
  TextLayout layout_;
  uint64_t layout_serial_ = 0;
  float layout_width_ = -1.f, layout_font_ = 0.f;
  int hover_pos_ = -1;  // window position hovered last frame (−1: none): the view shows its weights
  // The query, trace and view the scroll last followed: it follows again when one changes.
  struct Follow {
    int query = -2, layer = -1, head = -1;
    uint64_t serial = 0;
    TextViewMode mode = TextViewMode::Head;
    bool attribution = false;
    bool operator!=(const Follow& o) const {
      return query != o.query || layer != o.layer || head != o.head || serial != o.serial || mode != o.mode ||
             attribution != o.attribution;
    }
  } followed_;
  int follow_frames_ = 0;  // frames left to bring the followed query into view
  bool focused_ = false;
  ImVec4 text_rect_{0, 0, 0, 0};
  ExportBox export_{"attnviz-text.html", ".html: a page with the text and every weight; .svg: the same as vectors; .png: an image of it",
                    /*message_below=*/true};
};

}  // namespace attnviz::ui
