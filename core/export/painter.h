// Drawing surfaces shared by the figure exports: the same layout code draws on a raster
// image (PNG) or writes an SVG document. Coordinates are pixels from the top-left corner.
#pragma once
#include <string>

#include "core/export/colormap.h"
#include "core/export/image.h"

namespace attnviz {

// `s` with & < > " ' written as XML/HTML entities (for text and attribute values).
std::string xml_escape(const std::string& s);
// "#rrggbb".
std::string hex_rgb(Rgb8 c);
// A float written so that it reads back as the same float32 ("%.9g"; "inf", "-inf").
std::string exact_float(float v);
// Three significant digits ("%.3g"), for labels.
std::string short_float(float v);

class Painter {
 public:
  virtual ~Painter() = default;
  virtual void rect(int x, int y, int w, int h, Rgb8 c) = 0;
  // A heatmap cell: a rect that an SVG also labels with its row, column and value.
  virtual void cell(int x, int y, int w, int h, Rgb8 c, int row, int col, float value) = 0;
  virtual void text(int x, int y, const std::string& s, float px, Rgb8 c) = 0;  // top-left at (x, y)
  // Text laid out `w` pixels wide by measure(): an SVG stretches or squeezes it to that
  // width, so a viewer with another font keeps the layout.
  virtual void text_fit(int x, int y, int w, const std::string& s, float px, Rgb8 c) { (void)w, text(x, y, s, px, c); }
  // A group of what follows, until end_group(), carrying `attributes` (already escaped,
  // e.g. `class="key" data-weight="0.5"`); nothing on a raster.
  virtual void begin_group(const std::string& attributes) { (void)attributes; }
  virtual void end_group() {}
  virtual int measure(const std::string& s, float px) const = 0;
};

class RasterPainter : public Painter {
 public:
  RasterPainter(Image& img, const TextRenderer& tr) : img_(img), tr_(tr) {}
  void rect(int x, int y, int w, int h, Rgb8 c) override { img_.fill_rect(x, y, w, h, c); }
  void cell(int x, int y, int w, int h, Rgb8 c, int, int, float) override { img_.fill_rect(x, y, w, h, c); }
  void text(int x, int y, const std::string& s, float px, Rgb8 c) override { tr_.draw(img_, x, y, s, px, c); }
  int measure(const std::string& s, float px) const override;

 private:
  Image& img_;
  const TextRenderer& tr_;
};

class SvgPainter : public Painter {
 public:
  explicit SvgPainter(const TextRenderer& tr) : tr_(tr) {}
  void rect(int x, int y, int w, int h, Rgb8 c) override;
  void cell(int x, int y, int w, int h, Rgb8 c, int row, int col, float value) override;
  void text(int x, int y, const std::string& s, float px, Rgb8 c) override;
  void text_fit(int x, int y, int w, const std::string& s, float px, Rgb8 c) override;
  void begin_group(const std::string& attributes) override { body_ += "<g " + attributes + ">\n"; }
  void end_group() override { body_ += "</g>\n"; }
  int measure(const std::string& s, float px) const override;
  // The whole document: a W × H canvas on a `background` rectangle, then what was drawn.
  std::string document(int W, int H, Rgb8 background) const;

 private:
  const TextRenderer& tr_;
  std::string body_;
};

}  // namespace attnviz
