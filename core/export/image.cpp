#include "core/export/image.h"

#include <stb/stb_image_write.h>
#include <stb/stb_truetype.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>

#include "core/export/font_files.h"
#include "core/tokenize/tokenizer.h"

namespace attnviz {

Image::Image(int w, int h, Rgb8 bg) : width(w), height(h), rgb(static_cast<size_t>(w) * h * 3) {
  for (size_t i = 0; i < rgb.size(); i += 3) {
    rgb[i] = bg.r;
    rgb[i + 1] = bg.g;
    rgb[i + 2] = bg.b;
  }
}

void Image::fill_rect(int x, int y, int w, int h, Rgb8 c) {
  const int x0 = std::max(0, x), y0 = std::max(0, y), x1 = std::min(width, x + w), y1 = std::min(height, y + h);
  for (int yy = y0; yy < y1; ++yy)
    for (int xx = x0; xx < x1; ++xx) {
      uint8_t* p = &rgb[(static_cast<size_t>(yy) * width + xx) * 3];
      p[0] = c.r;
      p[1] = c.g;
      p[2] = c.b;
    }
}

Rgb8 Image::pixel(int x, int y) const {
  const uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
  return {p[0], p[1], p[2]};
}

std::string Image::encode_png() const {
  std::string out;
  stbi_write_png_to_func(
      [](void* ctx, void* data, int size) { static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), size); },
      &out, width, height, 3, rgb.data(), width * 3);
  return out;
}

struct TextRenderer::Impl {
  std::string path;
  std::vector<unsigned char> bytes;
  stbtt_fontinfo font{};
  bool ok = false;
};

TextRenderer::TextRenderer() : impl_(std::make_unique<Impl>()) {
  const FontFile f = find_label_font();
  if (f.path.empty()) return;
  std::ifstream in(f.path, std::ios::binary);
  impl_->bytes.assign(std::istreambuf_iterator<char>(in), {});
  if (impl_->bytes.empty()) return;
  const int offset = stbtt_GetFontOffsetForIndex(impl_->bytes.data(), f.index);
  impl_->ok = offset >= 0 && stbtt_InitFont(&impl_->font, impl_->bytes.data(), offset) != 0;
  impl_->path = f.path;
}

TextRenderer::~TextRenderer() = default;
bool TextRenderer::ok() const { return impl_->ok; }
const std::string& TextRenderer::font_path() const { return impl_->path; }

namespace {
uint32_t decode_codepoint(const std::string& ch) {
  const auto c0 = static_cast<unsigned char>(ch[0]);
  uint32_t cp = ch.size() == 1 ? c0 : (c0 & (0xff >> (ch.size() + 1)));
  for (size_t k = 1; k < ch.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(ch[k]) & 0x3f);
  return cp;
}
std::vector<uint32_t> codepoints(const std::string& text) {
  std::vector<uint32_t> cps;
  try {
    for (const auto& ch : utf8_split(text)) cps.push_back(decode_codepoint(ch));
  } catch (...) {
    cps.push_back('?');
  }
  return cps;
}
}  // namespace

int TextRenderer::measure(const std::string& text, float px) const {
  if (!impl_->ok) return 0;
  const float scale = stbtt_ScaleForPixelHeight(&impl_->font, px);
  float w = 0;
  for (uint32_t cp : codepoints(text)) {
    int adv = 0, lsb = 0;
    stbtt_GetCodepointHMetrics(&impl_->font, static_cast<int>(cp), &adv, &lsb);
    w += adv * scale;
  }
  return static_cast<int>(std::ceil(w));
}

float TextRenderer::em_size(float px) const {
  if (!impl_->ok) return px;
  // draw() scales font units by px / (ascent − descent); font-size F scales them by F / em.
  return px * stbtt_ScaleForPixelHeight(&impl_->font, 1.f) / stbtt_ScaleForMappingEmToPixels(&impl_->font, 1.f);
}

float TextRenderer::ascent(float px) const {
  if (!impl_->ok) return 0.8f * px;
  int ascent = 0, descent = 0, gap = 0;
  stbtt_GetFontVMetrics(&impl_->font, &ascent, &descent, &gap);
  return static_cast<float>(ascent) * stbtt_ScaleForPixelHeight(&impl_->font, px);
}

int TextRenderer::draw(Image& img, int x, int y, const std::string& text, float px, Rgb8 color) const {
  if (!impl_->ok) return 0;
  const float scale = stbtt_ScaleForPixelHeight(&impl_->font, px);
  int ascent = 0, descent = 0, gap = 0;
  stbtt_GetFontVMetrics(&impl_->font, &ascent, &descent, &gap);
  const int baseline = y + static_cast<int>(std::lround(ascent * scale));
  float pen = static_cast<float>(x);
  for (uint32_t cp : codepoints(text)) {
    int adv = 0, lsb = 0, x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    stbtt_GetCodepointHMetrics(&impl_->font, static_cast<int>(cp), &adv, &lsb);
    stbtt_GetCodepointBitmapBox(&impl_->font, static_cast<int>(cp), scale, scale, &x0, &y0, &x1, &y1);
    const int gw = x1 - x0, gh = y1 - y0;
    if (gw > 0 && gh > 0) {
      std::vector<unsigned char> bmp(static_cast<size_t>(gw) * gh);
      stbtt_MakeCodepointBitmap(&impl_->font, bmp.data(), gw, gh, gw, scale, scale, static_cast<int>(cp));
      const int ox = static_cast<int>(std::lround(pen)) + x0, oy = baseline + y0;
      for (int j = 0; j < gh; ++j)
        for (int i = 0; i < gw; ++i) {
          const int X = ox + i, Y = oy + j;
          if (X < 0 || Y < 0 || X >= img.width || Y >= img.height) continue;
          const float a = bmp[static_cast<size_t>(j) * gw + i] / 255.f;
          uint8_t* p = &img.rgb[(static_cast<size_t>(Y) * img.width + X) * 3];
          p[0] = static_cast<uint8_t>(std::lround(p[0] + a * (color.r - p[0])));
          p[1] = static_cast<uint8_t>(std::lround(p[1] + a * (color.g - p[1])));
          p[2] = static_cast<uint8_t>(std::lround(p[2] + a * (color.b - p[2])));
        }
    }
    pen += adv * scale;
  }
  return static_cast<int>(std::lround(pen)) - x;
}

}  // namespace attnviz
