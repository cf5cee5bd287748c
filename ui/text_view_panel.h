// The text itself, wrapped like a document, each token's background shaded by the weight it
// receives from the selected query: for the selected head, or the mean or max over the
// layer's heads or over every layer (a combo). Hover a token to see its weights from it,
// click to select it as the query; ←/→ move the query by a token and ↑/↓ by a line while
// the panel has focus. Tokens after the query are pale (the causal mask), those outside a
// local layer's window brown, those cropped by block_size grey, as in the token strip. It
// scrolls to keep the query and its strongest key in view. One row of weights per change
// (ui/text_view.h, cached), and only the visible lines are drawn: smooth at T = 4096.
// Exports the view as a self-contained HTML page or a PNG.
#pragma once
#include "ui/export_box.h"
#include "ui/panel.h"
#include "ui/text_view.h"

namespace attnviz::ui {

class TextViewPanel : public Panel {
 public:
  TextViewPanel() : Panel("Text view", /*open=*/false) {}
  // The panel had keyboard focus last frame: the arrow keys move its query, not the layer/head.
  bool focused() const { return open() && focused_; }
  ImVec4 text_rect() const { return text_rect_; }  // (x, y, w, h) of the text drawn last frame
  void set_mode(TextViewMode m) { mode_ = m; }

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  void draw_controls(FrameContext& ctx, const TextShading& sh, int query);
  void draw_export(const FrameContext& ctx, const TextShading& sh, int query);
  void draw_text(FrameContext& ctx, const TextShading& sh);
  // The pieces and their wrapped lines, rebuilt when the text, the font or the width change.
  void update_layout(const FrameContext& ctx, float width);
  void move_query(FrameContext& ctx, int query);
  void token_tooltip(const FrameContext& ctx, const TextShading& sh, int k) const;

  TextViewMode mode_ = TextViewMode::Head;
  TextShadingCache cache_;
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
    bool operator!=(const Follow& o) const {
      return query != o.query || layer != o.layer || head != o.head || serial != o.serial || mode != o.mode;
    }
  } followed_;
  int follow_frames_ = 0;  // frames left to bring the followed query into view
  bool focused_ = false;
  ImVec4 text_rect_{0, 0, 0, 0};
  ExportBox export_{"attnviz-text.html", ".html: a page with the text and every weight; .svg: the same as vectors; .png: an image of it",
                    /*message_below=*/true};
};

}  // namespace attnviz::ui
