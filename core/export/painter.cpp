#include "core/export/painter.h"

#include <cmath>
#include <cstdio>


namespace attnviz {

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string hex_rgb(Rgb8 c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

std::string exact_float(float v) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));  // round-trips float32
  return buf;
}

std::string short_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", static_cast<double>(v));
  return buf;
}

namespace {

// Without a font, text is measured as boxes of a plausible width.
int measure_with(const TextRenderer& tr, const std::string& s, float px) {
  return tr.ok() ? tr.measure(s, px) : static_cast<int>(px * 0.6f * static_cast<float>(s.size()));
}

// A <text> whose glyphs cover what TextRenderer::draw covers for pixel height `px` with its
// top-left at (x, y): SVG places text by its baseline and sizes it in ems.
std::string svg_text(const TextRenderer& tr, int x, int y, const std::string& s, float px, Rgb8 c, const std::string& extra) {
  return "<text x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y + static_cast<int>(std::lround(tr.ascent(px)))) +
         "\" font-size=\"" + short_float(tr.em_size(px)) + "\" fill=\"" + hex_rgb(c) + "\"" + extra + ">" + xml_escape(s) +
         "</text>\n";
}

}  // namespace

int RasterPainter::measure(const std::string& s, float px) const { return measure_with(tr_, s, px); }
int SvgPainter::measure(const std::string& s, float px) const { return measure_with(tr_, s, px); }

void SvgPainter::rect(int x, int y, int w, int h, Rgb8 c) {
  body_ += "<rect x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) + "\" width=\"" + std::to_string(w) +
           "\" height=\"" + std::to_string(h) + "\" fill=\"" + hex_rgb(c) + "\"/>\n";
}

void SvgPainter::cell(int x, int y, int w, int h, Rgb8 c, int row, int col, float value) {
  body_ += "<rect class=\"cell\" x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) + "\" width=\"" +
           std::to_string(w) + "\" height=\"" + std::to_string(h) + "\" fill=\"" + hex_rgb(c) + "\" data-row=\"" +
           std::to_string(row) + "\" data-col=\"" + std::to_string(col) + "\" data-value=\"" + exact_float(value) +
           "\"><title>" + exact_float(value) + "</title></rect>\n";
}

void SvgPainter::text(int x, int y, const std::string& s, float px, Rgb8 c) { body_ += svg_text(tr_, x, y, s, px, c, ""); }

void SvgPainter::text_fit(int x, int y, int w, const std::string& s, float px, Rgb8 c) {
  if (w <= 0 || s.find_first_not_of(' ') == std::string::npos) return text(x, y, s, px, c);
  body_ += svg_text(tr_, x, y, s, px, c,
                    " xml:space=\"preserve\" textLength=\"" + std::to_string(w) + "\" lengthAdjust=\"spacingAndGlyphs\"");
}

std::string SvgPainter::document(int W, int H, Rgb8 background) const {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(W) +
         "\" height=\"" + std::to_string(H) + "\" viewBox=\"0 0 " + std::to_string(W) + " " + std::to_string(H) +
         "\" font-family=\"Noto Sans CJK SC, DejaVu Sans, sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"" +
         hex_rgb(background) + "\"/>\n" + body_ + "</svg>\n";
}

}  // namespace attnviz
