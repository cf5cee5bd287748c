#include "ui/draw/fonts.h"

#include "core/export/font_files.h"

#include <imgui_impl_opengl3.h>

#include <cmath>

namespace attnviz::ui {

namespace {
// Symbols attnviz uses in labels, and scripts beyond Latin-1.
constexpr ImWchar kExtraRanges[] = {
    0x0370, 0x03FF,  // Greek
    0x1D00, 0x1D7F,  // phonetic extensions (ᵀ)
    0x2000, 0x206F,  // general punctuation (…, ·)
    0x2070, 0x209F,  // super- and subscripts
    0x2190, 0x21FF,  // arrows (↵ ⇥ →)
    0x2200, 0x22FF,  // mathematical operators (√ −)
    0x2400, 0x243F,  // control pictures (␣)
    0x2500, 0x25FF,  // box drawing, blocks, geometric shapes (■ ▶)
    0x2700, 0x27BF,  // dingbats (❚)
    0,
};
}  // namespace


void FontManager::request(float size_px, const std::string& extra_chars) {
  if (std::fabs(size_px - want_size_) > 0.01f) dirty_ = true;
  // Rebuild only when new characters appear (not for every keystroke).
  for (size_t i = 0; i < extra_chars.size();) {
    const unsigned char c = static_cast<unsigned char>(extra_chars[i]);
    const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (c >= 0x80) {
      const std::string ch = extra_chars.substr(i, n);
      if (built_chars_.find(ch) == std::string::npos && want_chars_.find(ch) == std::string::npos) {
        want_chars_ += ch;
        dirty_ = true;
      }
    }
    i += n;
  }
  want_size_ = size_px;
}

void FontManager::rebuild() {
  ImGuiIO& io = ImGui::GetIO();
  if (gl_ready_) ImGui_ImplOpenGL3_DestroyFontsTexture();
  io.Fonts->Clear();
  // Glyphs at the size they are drawn, on whole pixels, and thick lines as triangles (not
  // the atlas's baked line textures): the atlas is then sampled texel for texel, so
  // app/gui_main.cpp samples it GL_NEAREST, which a software renderer draws about a fifth
  // faster than GL_LINEAR (docs/performance.md).
  io.Fonts->Flags |= ImFontAtlasFlags_NoBakedLines;

  ImFontGlyphRangesBuilder b;
  b.AddRanges(io.Fonts->GetGlyphRangesDefault());
  b.AddRanges(io.Fonts->GetGlyphRangesCyrillic());
  b.AddRanges(io.Fonts->GetGlyphRangesChineseSimplifiedCommon());  // + CJK punctuation, kana, fullwidth
  b.AddRanges(kExtraRanges);
  built_chars_ += want_chars_;
  want_chars_.clear();
  b.AddText(built_chars_.c_str());
  ranges_.clear();
  b.BuildRanges(&ranges_);

  fonts_ = Fonts{};
  fonts_.size_px = want_size_;
  const FontFile latin = find_font_file("sans-serif", 'a');
  const FontFile cjk = find_font_file("sans-serif:lang=zh-cn", 0x732B /* 猫 */);
  fonts_.latin_file = latin.path;
  fonts_.cjk_file = cjk.path;
  fonts_.cjk_index = cjk.index;

  auto add = [&](float size, ImFont** out) {
    ImFontConfig cfg;
    cfg.OversampleH = 1;
    cfg.OversampleV = 1;
    cfg.PixelSnapH = true;
    ImFont* f = nullptr;
    if (!fonts_.latin_file.empty()) {
      cfg.FontNo = latin.index;
      f = io.Fonts->AddFontFromFileTTF(fonts_.latin_file.c_str(), size, &cfg, ranges_.Data);
    }
    if (!f) {
      ImFontConfig def;
      def.SizePixels = std::round(size);
      f = io.Fonts->AddFontDefault(&def);
      fonts_.latin_file.clear();
    }
    if (!fonts_.cjk_file.empty()) {
      ImFontConfig m;
      m.MergeMode = true;
      m.FontNo = fonts_.cjk_index;
      m.OversampleH = 1;
      m.OversampleV = 1;
      m.PixelSnapH = true;
      // CJK fonts reserve a tall line box, so at the same pixel size their glyphs look
      // smaller than Latin ones: give them a little more.
      if (!io.Fonts->AddFontFromFileTTF(fonts_.cjk_file.c_str(), std::round(size * 1.15f), &m, ranges_.Data))
        fonts_.cjk_file.clear();
    }
    *out = f;
  };
  add(want_size_, &fonts_.ui);
  add(std::round(want_size_ * 1.6f), &fonts_.big);
  if (!io.Fonts->Build()) {  // e.g. a font file stb_truetype cannot read: fall back to the built-in font
    io.Fonts->Clear();
    fonts_.latin_file.clear();
    fonts_.cjk_file.clear();
    ImFontConfig def;
    def.SizePixels = std::round(want_size_);
    fonts_.ui = io.Fonts->AddFontDefault(&def);
    fonts_.big = fonts_.ui;
    io.Fonts->Build();
  }
  io.FontDefault = fonts_.ui;

  fonts_.note = (fonts_.latin_file.empty() ? std::string("font: ImGui built-in") : "font: " + fonts_.latin_file) +
                (fonts_.cjk_file.empty() ? " · no CJK font found (install fonts-noto-cjk): Chinese shows as '?'"
                                         : " + " + fonts_.cjk_file + " #" + std::to_string(fonts_.cjk_index));
  // The first atlas is uploaded by ImGui_ImplOpenGL3_NewFrame (with the other device
  // objects); later ones here.
  if (gl_ready_) ImGui_ImplOpenGL3_CreateFontsTexture();
  gl_ready_ = true;
  dirty_ = false;
}

}  // namespace attnviz::ui
