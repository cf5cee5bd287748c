// The text view's logic, without ImGui (ui/text_view_panel.h draws it): the weight each token
// of the text receives from one query, for one head or combined over the heads of a layer or
// of every layer; the marks of the tokens the query cannot see (after it, outside a local
// layer's window, cropped by block_size); the text wrapped into lines; and the exports
// (a self-contained HTML file, an SVG, a PNG). Unit-tested in tests/test_text_view.cpp.
//
// Letters as in core/model/config.h: L layers, H query heads, T tokens in the window; N
// tokens of the text = dropped + T (the text view shows the cropped ones too). A query and
// a key are window positions 0 … T−1; token k of the text is window position k − dropped.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/export/colormap.h"
#include "core/model/model.h"
#include "core/engine/lens.h"
#include "core/engine/trace.h"
#include "core/tokenize/labels.h"

namespace attnviz::ui {

// Whose weights the view shows.
enum class TextViewMode { Head, LayerMean, LayerMax, AllMean, AllMax };
constexpr int kTextViewModes = 5;
// "this head", "mean over the layer's heads", …; for logit shares (key_shares) the max
// modes are sums like the mean ones: "sum over the layer's heads".
const char* text_view_mode_label(TextViewMode m, bool shares = false);

// The query in range: −1 (none chosen) or past the end → the last token T − 1; −1 when T = 0.
int clamp_query(int query, int T);

// Row `query` of the softmax of the heads the mode takes, combined key by key: the head's own
// row, or the mean / the max over the H heads of `layer` or the L·H heads of every layer.
// Each row comes from LayerTrace::row_values (a compact trace recomputes just that row).
// out: (T). `scratch` holds one row. A hybrid: on a linear-attention layer its rows of A
// (signed: returns true), on a convolution layer zeros; over every layer, its softmax layers.
bool query_weights(const Trace& tr, int layer, int head, int query, TextViewMode mode, std::vector<float>& out,
                   std::vector<float>& scratch);

// The logit attribution at the query carried back to the keys (core/engine/lens.h), as the
// mode takes the heads: the head's own shares, or the sum over the layer's heads or over
// every head of every layer (mean and max alike: shares add up to the logit). out: (T).
void key_shares(const KeyAttribution& a, int layer, int head, TextViewMode mode, std::vector<float>& out);

// The window a mode marks: the layer's W (0: global) for the head and layer modes; over
// every layer, only keys that no layer's window reaches are marked: 0 when any layer is
// global, else the largest W.
int marked_window(const Trace& tr, int layer, TextViewMode mode);

// What one token of the text shows.
enum class TokenMark {
  Key,            // a key the query sees: shaded by its weight
  Future,         // after the query (j > i): the causal mask hides it
  OutsideWindow,  // before the window of a local layer (j < i − W + 1)
  Dropped,        // cropped by block_size: the model never saw it
};

struct TokenShade {
  TokenMark mark = TokenMark::Key;
  float weight = 0.f;  // the weight the query gives it (0 unless a key); signed: its logit share
  float shade = 0.f;   // weight / the row's largest weight, in [0, 1]; signed: / the largest |share|, in [−1, 1]
};

struct TextShading {
  int query = -1;    // window position of the query (−1: nothing to show)
  int dropped = 0;   // tokens of the text before the window
  int window = 0;    // the window marked (0: none)
  float max_weight = 0.f;         // signed: the largest |share|
  bool signed_shares = false;     // the weights are logit shares (key_shares), not attention weights
  std::vector<TokenShade> tokens;  // (N = dropped + T) one per token of the text
  std::vector<int> top_keys;       // window positions of the strongest keys, strongest first
};

// Shades the N = dropped + T tokens from the query's weights (T values, as query_weights
// gives them): keys by weight / max, the rest marked; the `top_n` strongest keys listed.
// `signed_shares`: the values are logit shares (key_shares), shaded by share / max |share|
// and the keys ranked by |share|.
TextShading shade_tokens(const float* weights, int T, int query, int dropped, int window, int top_n = 3,
                         bool signed_shares = false);

// The shading of (trace serial, layer, head, query, mode), computed once: a frame that asks
// again gets the same result without touching the trace.
class TextShadingCache {
 public:
  const TextShading& get(const Trace& tr, uint64_t serial, int layer, int head, int query, TextViewMode mode);
  int computed() const { return computed_; }  // how many times it computed (tests)

 private:
  struct Key {
    uint64_t serial = 0;
    int layer = -1, head = -1, query = -1, T = -1, dropped = -1;
    TextViewMode mode = TextViewMode::Head;
    bool operator==(const Key& o) const {
      return serial == o.serial && layer == o.layer && head == o.head && query == o.query && T == o.T &&
             dropped == o.dropped && mode == o.mode;
    }
  };
  Key key_;
  bool valid_ = false;
  TextShading shading_;
  std::vector<float> row_, scratch_;  // (T) each
  int computed_ = 0;
};

// A token's text as the document shows it: the label's own text, spaces kept; a newline
// becomes "↵" and ends the line, a tab "⇥", other control characters "\xNN", empty "∅".
struct DocPiece {
  std::string text;
  bool line_break = false;  // the line ends after this token
};
DocPiece doc_piece(const std::string& label);
// One piece per token of the text (all_ids: dropped + window), from the labels the token
// strip uses (token_text of the id where there is no label).
std::vector<DocPiece> doc_pieces(const std::vector<TokenLabel>& labels, const std::vector<int>& all_ids,
                                 const Model* m);

// The text wrapped into lines `max_width` wide, token by token (a token is never split; one
// wider than a line gets a line of its own).
struct TextLayout {
  std::vector<float> x;          // (N) left edge of each token on its line
  std::vector<float> w;          // (N) its width
  std::vector<int> line_of;      // (N) its line
  std::vector<int> line_start;   // (lines + 1) first token of each line, then N
  int lines() const { return static_cast<int>(line_start.size()) - 1; }
};
TextLayout wrap_tokens(const std::vector<float>& widths, const std::vector<DocPiece>& pieces, float max_width);
// The token on the line above (dir −1) or below (+1) of token k nearest to its middle;
// k itself on the first / last line.
int token_on_next_line(const TextLayout& lay, int k, int dir);

// A shade as a background colour over `bg`: bg at 0, kTextViewHighlight at 1,
// kTextViewNegative at −1 (a logit share against the target).
constexpr Rgb8 kTextViewHighlight{255, 150, 30};
constexpr Rgb8 kTextViewNegative{60, 140, 255};
Rgb8 shade_rgb(float shade, Rgb8 bg);

// ---------- export
struct TextViewDoc {
  std::string title;              // "model · layer 1 · head 4 · query 12 'cat'"
  std::vector<DocPiece> pieces;   // (N)
  TextShading shading;
};
// "builtin:fortunes-en · layer 1 · head 4 · query 12 ' cat'" (with the mode's words).
std::string text_view_title(const std::string& model, int layer, int head, TextViewMode mode, int query,
                            const std::string& query_label);
// A self-contained HTML page: the title, a legend and the text, one <span> per token with
// its weight as data-weight and an inline background colour.
std::string render_text_view_html(const TextViewDoc& doc);
// A PNG of the same page `width_px` wide. `note` says when no font was found (the boxes
// are drawn without their text).
std::string render_text_view_png(const TextViewDoc& doc, int width_px, std::string* note);
// The same page as an SVG document `width_px` wide (laid out with the PNG's font, each token
// a <g> with its class, data-k, data-pos and data-weight like the HTML's spans).
std::string render_text_view_svg(const TextViewDoc& doc, int width_px);
// Writes .html/.htm, .svg or .png by the path's extension, atomically (write_file_atomic);
// throws attnviz::Error saying what went wrong (usage for another extension). Returns a
// note ("" or why the PNG has no text).
std::string write_text_view(const TextViewDoc& doc, const std::string& path);

}  // namespace attnviz::ui
