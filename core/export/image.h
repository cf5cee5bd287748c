// A small RGB canvas for the image exporters: filled rectangles, anti-aliased text
// (stb_truetype, a font found through fontconfig), PNG encoding (stb_image_write).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/export/colormap.h"

namespace attnviz {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // (height, width, 3), row 0 at the top

  Image(int w, int h, Rgb8 background);
  void fill_rect(int x, int y, int w, int h, Rgb8 c);  // clipped to the canvas
  Rgb8 pixel(int x, int y) const;
  std::string encode_png() const;
};

// Draws UTF-8 text. When no font can be found the text is skipped and ok() is false (the
// exporters say so); images are still written.
class TextRenderer {
 public:
  TextRenderer();
  ~TextRenderer();
  bool ok() const;
  const std::string& font_path() const;
  // Width in pixels of `text` at pixel height `px`.
  int measure(const std::string& text, float px) const;
  // The CSS/SVG font-size (em, in pixels) whose glyphs match pixel height `px` here (the
  // font's ascent − descent is `px` tall; an em is usually smaller). `px` without a font.
  float em_size(float px) const;
  // The baseline's distance below the top for pixel height `px` (0.8 px without a font).
  float ascent(float px) const;
  // Draws with its top-left corner at (x, y); returns the advance in pixels.
  int draw(Image& img, int x, int y, const std::string& text, float px, Rgb8 color) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnviz
