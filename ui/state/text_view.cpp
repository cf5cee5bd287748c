#include "ui/state/text_view.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "core/export/export.h"
#include "core/export/image.h"
#include "core/export/painter.h"
#include "core/model/safetensors.h"
#include "ui/state/app_state.h"

namespace attnviz::ui {

const char* text_view_mode_label(TextViewMode m, bool shares) {
  if (shares) return m == TextViewMode::Head ? "this head"
                     : m == TextViewMode::LayerMean || m == TextViewMode::LayerMax ? "sum over the layer's heads"
                                                                                    : "sum over all layers and heads";
  switch (m) {
    case TextViewMode::Head: return "this head";
    case TextViewMode::LayerMean: return "mean over the layer's heads";
    case TextViewMode::LayerMax: return "max over the layer's heads";
    case TextViewMode::AllMean: return "mean over all layers and heads";
    case TextViewMode::AllMax: return "max over all layers and heads";
  }
  return "";
}

int clamp_query(int query, int T) {
  if (T <= 0) return -1;
  return query < 0 || query >= T ? T - 1 : query;
}

bool query_weights(const Trace& tr, int layer, int head, int query, TextViewMode mode, std::vector<float>& out,
                   std::vector<float>& scratch) {
  const int T = tr.T();
  out.assign(static_cast<size_t>(std::max(T, 0)), 0.f);
  if (T == 0 || query < 0 || query >= T || tr.layers.empty()) return false;
  const bool all = mode == TextViewMode::AllMean || mode == TextViewMode::AllMax;
  const bool max = mode == TextViewMode::LayerMax || mode == TextViewMode::AllMax;
  const int L = static_cast<int>(tr.layers.size());
  const int l0 = all ? 0 : std::clamp(layer, 0, L - 1), l1 = all ? L : l0 + 1;
  // One linear layer: its rows of A (signed). Every layer: the softmax layers alone.
  const bool linear = !all && tr.layers[static_cast<size_t>(l0)].mixer == Mixer::GatedDeltaNet;
  int rows = 0;
  for (int l = l0; l < l1; ++l) {
    const LayerTrace& lt = tr.layers[static_cast<size_t>(l)];
    if (lt.mixer == Mixer::ShortConv || (all && lt.mixer != Mixer::Softmax)) continue;
    const int H = static_cast<int>(lt.heads());
    const int h0 = mode == TextViewMode::Head ? std::clamp(head, 0, H - 1) : 0;
    const int h1 = mode == TextViewMode::Head ? h0 + 1 : H;
    for (int h = h0; h < h1; ++h, ++rows) {
      // (T), one row's work when compact
      const float* p = lt.row_values(linear ? Stage::Implicit : Stage::Probs, h, query, scratch);
      for (int j = 0; j < T; ++j) out[static_cast<size_t>(j)] = max ? std::max(out[static_cast<size_t>(j)], p[j]) : out[static_cast<size_t>(j)] + p[j];
    }
  }
  if (!max && rows > 1)
    for (float& v : out) v /= static_cast<float>(rows);
  return linear;
}

void key_shares(const KeyAttribution& a, int layer, int head, TextViewMode mode, std::vector<float>& out) {
  out.assign(static_cast<size_t>(std::max(a.T, 0)), 0.f);
  if (a.L == 0 || a.H == 0) return;
  const bool all = mode == TextViewMode::AllMean || mode == TextViewMode::AllMax;
  const int l0 = all ? 0 : std::clamp(layer, 0, a.L - 1), l1 = all ? a.L : l0 + 1;
  const int h0 = mode == TextViewMode::Head ? std::clamp(head, 0, a.H - 1) : 0;
  const int h1 = mode == TextViewMode::Head ? h0 + 1 : a.H;
  for (int l = l0; l < l1; ++l)
    for (int h = h0; h < h1; ++h) {
      const float* s = a.head(l, h);
      for (int j = 0; j < a.T; ++j) out[static_cast<size_t>(j)] += s[j];
    }
}

int marked_window(const Trace& tr, int layer, TextViewMode mode) {
  if (tr.layers.empty()) return 0;
  if (mode != TextViewMode::AllMean && mode != TextViewMode::AllMax)
    return tr.layers[static_cast<size_t>(std::clamp(layer, 0, static_cast<int>(tr.layers.size()) - 1))].window;
  int w = 0;
  for (const LayerTrace& lt : tr.layers) {
    if (lt.window <= 0) return 0;  // a global layer sees every earlier key
    w = std::max(w, lt.window);
  }
  return w;
}

TextShading shade_tokens(const float* weights, int T, int query, int dropped, int window, int top_n,
                         bool signed_shares) {
  TextShading s;
  s.signed_shares = signed_shares;
  s.dropped = std::max(0, dropped);
  s.query = T > 0 && query >= 0 && query < T ? query : -1;
  s.window = std::max(0, window);
  s.tokens.resize(static_cast<size_t>(s.dropped + std::max(T, 0)));
  for (int k = 0; k < s.dropped; ++k) s.tokens[static_cast<size_t>(k)].mark = TokenMark::Dropped;
  if (s.query < 0) {
    for (int j = 0; j < T; ++j) s.tokens[static_cast<size_t>(s.dropped + j)].mark = TokenMark::Future;
    return s;
  }
  const int first = window_first(s.query, s.window);
  const auto size = [&](int j) { return signed_shares ? std::abs(weights[j]) : weights[j]; };
  for (int j = first; j <= s.query; ++j) s.max_weight = std::max(s.max_weight, size(j));
  std::vector<int> keys;
  for (int j = 0; j < T; ++j) {
    TokenShade& t = s.tokens[static_cast<size_t>(s.dropped + j)];
    if (j > s.query) t.mark = TokenMark::Future;
    else if (j < first) t.mark = TokenMark::OutsideWindow;
    else {
      t.weight = weights[j];
      t.shade = s.max_weight > 0.f ? std::clamp(weights[j] / s.max_weight, signed_shares ? -1.f : 0.f, 1.f) : 0.f;
      keys.push_back(j);
    }
  }
  const size_t n = std::min(keys.size(), static_cast<size_t>(std::max(top_n, 0)));
  std::partial_sort(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(n), keys.end(), [&](int a, int b) {
    return size(a) != size(b) ? size(a) > size(b) : a < b;
  });
  s.top_keys.assign(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(n));
  return s;
}

const TextShading& TextShadingCache::get(const Trace& tr, uint64_t serial, int layer, int head, int query,
                                         TextViewMode mode) {
  const Key key{serial, layer, head, query, tr.T(), tr.dropped, mode};
  if (valid_ && key == key_) return shading_;
  const bool signed_rows = query_weights(tr, layer, head, query, mode, row_, scratch_);
  shading_ = shade_tokens(row_.data(), tr.T(), query, tr.dropped, marked_window(tr, layer, mode), 3, signed_rows);
  key_ = key;
  valid_ = true;
  ++computed_;
  return shading_;
}

DocPiece doc_piece(const std::string& label) {
  DocPiece p;
  if (label.empty()) p.text = chip_label(label);  // ∅
  for (char c : label) {
    p.text += c == ' ' ? std::string(" ") : chip_label(std::string(1, c));  // the chip's marks, but spaces as spaces
    if (c == '\n') p.line_break = true;
  }
  return p;
}

std::vector<DocPiece> doc_pieces(const std::vector<TokenLabel>& labels, const std::vector<int>& all_ids,
                                 const Model* m) {
  std::vector<DocPiece> out;
  out.reserve(all_ids.size());
  for (size_t k = 0; k < all_ids.size(); ++k)
    out.push_back(doc_piece(k < labels.size() ? labels[k].text : token_text(m, all_ids[k])));
  return out;
}

TextLayout wrap_tokens(const std::vector<float>& widths, const std::vector<DocPiece>& pieces, float max_width) {
  TextLayout lay;
  const size_t n = widths.size();
  lay.x.resize(n);
  lay.w = widths;
  lay.line_of.resize(n);
  lay.line_start.push_back(0);
  float x = 0.f;
  for (size_t k = 0; k < n; ++k) {
    if (x > 0.f && x + widths[k] > max_width) {  // wrap before k
      lay.line_start.push_back(static_cast<int>(k));
      x = 0.f;
    }
    lay.x[k] = x;
    lay.line_of[k] = static_cast<int>(lay.line_start.size()) - 1;  // the line being filled
    x += widths[k];
    if (k < pieces.size() && pieces[k].line_break && k + 1 < n) {
      lay.line_start.push_back(static_cast<int>(k + 1));
      x = 0.f;
    }
  }
  lay.line_start.push_back(static_cast<int>(n));
  if (n == 0) lay.line_start = {0};
  return lay;
}

int token_on_next_line(const TextLayout& lay, int k, int dir) {
  if (k < 0 || k >= static_cast<int>(lay.x.size())) return k;
  const int line = lay.line_of[static_cast<size_t>(k)] + (dir < 0 ? -1 : 1);
  if (line < 0 || line >= lay.lines()) return k;
  const float mid = lay.x[static_cast<size_t>(k)] + 0.5f * lay.w[static_cast<size_t>(k)];
  int best = lay.line_start[static_cast<size_t>(line)];
  for (int j = best; j < lay.line_start[static_cast<size_t>(line) + 1]; ++j) {
    const float a = lay.x[static_cast<size_t>(j)], b = a + lay.w[static_cast<size_t>(j)];
    if (mid >= a && mid < b) return j;
    if (a <= mid) best = j;  // the last token starting left of the middle
  }
  return best;
}

Rgb8 shade_rgb(float shade, Rgb8 bg) {
  const float s = std::min(std::abs(shade), 1.f);
  const Rgb8 to = shade < 0.f ? kTextViewNegative : kTextViewHighlight;
  auto mix = [s](uint8_t a, uint8_t b) { return static_cast<uint8_t>(std::lround(a + (b - a) * s)); };
  return {mix(bg.r, to.r), mix(bg.g, to.g), mix(bg.b, to.b)};
}

// ---------- export

namespace {

constexpr Rgb8 kPageBg{255, 255, 255}, kPageText{20, 20, 20}, kDroppedBg{225, 225, 225}, kDroppedText{150, 150, 150},
    kFutureText{160, 160, 160}, kOutsideBg{236, 226, 208}, kOutsideText{138, 118, 80}, kQueryFrame{40, 90, 220};

const char* mark_class(TokenMark m) {
  switch (m) {
    case TokenMark::Key: return "key";
    case TokenMark::Future: return "future";
    case TokenMark::OutsideWindow: return "outside";
    case TokenMark::Dropped: return "dropped";
  }
  return "";
}

std::string legend(const TextShading& s) {
  char b[256];
  if (s.signed_shares)
    std::snprintf(b, sizeof b, "background: each token's share of the logit at the query (framed), carried by the "
                  "heads' attention: orange for, blue against, relative to the largest, %.4g", static_cast<double>(s.max_weight));
  else
    std::snprintf(b, sizeof b, "background: the weight each token receives from the query (framed), relative to the "
                  "largest, %.4g", static_cast<double>(s.max_weight));
  std::string out = b;
  if (s.window > 0) out += "; brown: outside the layer's window of " + std::to_string(s.window) + " keys";
  if (s.dropped > 0) out += "; grey: cropped by block_size (" + std::to_string(s.dropped) + " tokens)";
  return out + "; pale: after the query (causal mask)";
}

}  // namespace

std::string text_view_title(const std::string& model, int layer, int head, TextViewMode mode, int query,
                            const std::string& query_label) {
  std::string who;
  switch (mode) {
    case TextViewMode::Head: who = "layer " + std::to_string(layer) + " \xC2\xB7 head " + std::to_string(head); break;
    case TextViewMode::LayerMean: who = "layer " + std::to_string(layer) + " \xC2\xB7 mean of its heads"; break;
    case TextViewMode::LayerMax: who = "layer " + std::to_string(layer) + " \xC2\xB7 max of its heads"; break;
    case TextViewMode::AllMean: who = "mean of all layers and heads"; break;
    case TextViewMode::AllMax: who = "max of all layers and heads"; break;
  }
  return model + " \xC2\xB7 " + who + " \xC2\xB7 query " + std::to_string(query) + " '" + query_label + "'";
}

std::string render_text_view_html(const TextViewDoc& doc) {
  const TextShading& s = doc.shading;
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + xml_escape(doc.title) +
       "</title>\n<style>\n"
       "body { font-family: sans-serif; max-width: 60em; margin: 2em auto; padding: 0 1em; background: " + hex_rgb(kPageBg) +
       "; color: " + hex_rgb(kPageText) + "; }\n"
       "h1 { font-size: 1.2em; }\n.legend { color: #555; font-size: 0.9em; }\n"
       ".doc { white-space: pre-wrap; line-height: 1.9; font-size: 1.05em; }\n"
       ".doc span { border-radius: 3px; }\n"
       ".query { outline: 2px solid " + hex_rgb(kQueryFrame) + "; }\n"
       ".future { color: " + hex_rgb(kFutureText) + "; }\n"
       ".outside { color: " + hex_rgb(kOutsideText) + "; background: " + hex_rgb(kOutsideBg) + "; }\n"
       ".dropped { color: " + hex_rgb(kDroppedText) + "; background: " + hex_rgb(kDroppedBg) + "; }\n"
       "</style>\n</head>\n<body>\n<h1>" + xml_escape(doc.title) + "</h1>\n<p class=\"legend\">" +
       xml_escape(legend(s)) + "</p>\n<div class=\"doc\">";
  for (size_t k = 0; k < doc.pieces.size() && k < s.tokens.size(); ++k) {
    const TokenShade& t = s.tokens[k];
    const int pos = static_cast<int>(k) - s.dropped;
    std::string cls = mark_class(t.mark);
    if (pos == s.query) cls += " query";
    h += "<span class=\"" + cls + "\" data-k=\"" + std::to_string(k) + "\"";
    if (t.mark != TokenMark::Dropped) {
      const std::string w = exact_float(t.weight);
      h += " data-pos=\"" + std::to_string(pos) + "\" data-weight=\"" + w + "\" title=\"position " +
           std::to_string(pos) + (s.signed_shares ? ", logit share " : ", weight ") + w + "\"";
      if (t.mark == TokenMark::Key) h += " style=\"background: " + hex_rgb(shade_rgb(t.shade, kPageBg)) + "\"";
    }
    h += ">" + xml_escape(doc.pieces[k].text) + "</span>";
    if (doc.pieces[k].line_break) h += "\n";
  }
  h += "</div>\n</body>\n</html>\n";
  return h;
}

namespace {

// The page the PNG and the SVG show: the title and the legend wrapped word by word, then
// the text wrapped token by token, each token's box shaded. Measured on `p` (the same
// font for both), drawn on it when `draw`; returns the page's height.
int paint_page(Painter& p, const TextViewDoc& doc, int width_px, bool draw) {
  const TextShading& s = doc.shading;
  const float px = 18.f;
  const int margin = 24, line_h = 28, pad = 1;
  const int text_w = std::max(100, width_px - 2 * margin);
  std::vector<float> widths;  // (N)
  widths.reserve(doc.pieces.size());
  for (const DocPiece& piece : doc.pieces) widths.push_back(static_cast<float>(p.measure(piece.text, px) + 2 * pad));
  const TextLayout lay = wrap_tokens(widths, doc.pieces, static_cast<float>(text_w));
  auto words_into_lines = [&](const std::string& text, float size) {
    std::vector<std::string> lines(1);
    size_t at = 0;
    while (at < text.size()) {
      const size_t sp = text.find(' ', at + 1);
      const std::string word = text.substr(at, sp == std::string::npos ? std::string::npos : sp - at);
      if (!lines.back().empty() && p.measure(lines.back() + word, size) > text_w) {
        lines.emplace_back();
        lines.back() = word.substr(word[0] == ' ' ? 1 : 0);
      } else lines.back() += word;
      at = sp == std::string::npos ? text.size() : sp;
    }
    return lines;
  };
  const std::vector<std::string> title = words_into_lines(doc.title, px), leg = words_into_lines(legend(s), px * 0.85f);
  const int top = margin + static_cast<int>(title.size() + leg.size()) * line_h + line_h / 2;
  const int height = top + std::max(1, lay.lines()) * line_h + margin;
  if (!draw) return height;
  int y = margin;
  for (const std::string& l : title) {
    p.text_fit(margin, y, p.measure(l, px), l, px, kPageText);
    y += line_h;
  }
  for (const std::string& l : leg) {
    p.text_fit(margin, y, p.measure(l, px * 0.85f), l, px * 0.85f, Rgb8{90, 90, 90});
    y += line_h;
  }
  for (size_t k = 0; k < doc.pieces.size() && k < s.tokens.size(); ++k) {
    const TokenShade& t = s.tokens[k];
    const int pos = static_cast<int>(k) - s.dropped;
    const int x0 = margin + static_cast<int>(lay.x[k]), y0 = top + lay.line_of[k] * line_h;
    const int w = static_cast<int>(lay.w[k]);
    Rgb8 bg = kPageBg, fg = kPageText;
    if (t.mark == TokenMark::Key) bg = shade_rgb(t.shade, kPageBg);
    else if (t.mark == TokenMark::Future) fg = kFutureText;
    else if (t.mark == TokenMark::OutsideWindow) bg = kOutsideBg, fg = kOutsideText;
    else bg = kDroppedBg, fg = kDroppedText;
    std::string attrs = std::string("class=\"") + mark_class(t.mark) + (pos == s.query ? " query" : "") + "\" data-k=\"" +
                        std::to_string(k) + "\"";
    if (t.mark != TokenMark::Dropped)
      attrs += " data-pos=\"" + std::to_string(pos) + "\" data-weight=\"" + exact_float(t.weight) + "\"";
    p.begin_group(attrs);
    if (pos == s.query) {
      p.rect(x0 - 2, y0 + 1, w + 4, line_h - 2, kQueryFrame);  // a frame around the query
      p.rect(x0, y0 + 3, w, line_h - 6, bg);
    } else if (bg != kPageBg) p.rect(x0, y0 + 3, w - 1, line_h - 6, bg);
    p.text_fit(x0 + pad, y0 + (line_h - static_cast<int>(px)) / 2 - 1, w - 2 * pad, doc.pieces[k].text, px, fg);
    p.end_group();
  }
  return height;
}

}  // namespace

std::string render_text_view_png(const TextViewDoc& doc, int width_px, std::string* note) {
  const TextRenderer font;
  Image probe(1, 1, kPageBg);
  RasterPainter measure(probe, font);
  Image img(width_px, paint_page(measure, doc, width_px, false), kPageBg);
  RasterPainter paint(img, font);
  paint_page(paint, doc, width_px, true);
  if (note) *note = font.ok() ? "" : "no font found: the text is left out of the PNG";
  return img.encode_png();
}

std::string render_text_view_svg(const TextViewDoc& doc, int width_px) {
  const TextRenderer font;
  SvgPainter svg(font);
  const int height = paint_page(svg, doc, width_px, true);
  return svg.document(width_px, height, kPageBg);
}

std::string write_text_view(const TextViewDoc& doc, const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string note;
  std::string bytes;
  if (ext == ".html" || ext == ".htm") bytes = render_text_view_html(doc);
  else if (ext == ".png") bytes = render_text_view_png(doc, 1000, &note);
  else if (ext == ".svg") bytes = render_text_view_svg(doc, 1000);
  else
    throw Error("cannot export the text view as '" + path + "': the name must end in .html (a page with the text and "
                "its weights), .svg or .png", ErrorKind::Usage);
  write_file_atomic(path, bytes);
  return note;
}

}  // namespace attnviz::ui
