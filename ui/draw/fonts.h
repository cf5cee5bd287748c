// Fonts for the GUI: a Latin UI font with a CJK font merged in, both found through
// fontconfig (DejaVu/Noto Sans and Noto Sans CJK from fonts-noto-cjk on Debian), so that
// Chinese, Japanese and other non-Latin tokens render. Falls back to ImGui's built-in font
// (and says so) when fontconfig finds nothing.
#pragma once
#include <imgui.h>

#include <string>

namespace attnviz::ui {

struct Fonts {
  ImFont* ui = nullptr;    // all text
  ImFont* big = nullptr;   // large headings (1.6 × size)
  float size_px = 16.f;
  std::string latin_file;  // "" when ImGui's built-in font is used
  std::string cjk_file;    // "" when no CJK font was found
  int cjk_index = 0;       // face index inside a .ttc
  std::string note;        // one line for the UI: what was found or missing
};

class FontManager {
 public:
  // Asks for fonts of `size_px` covering `extra_chars` (UTF-8: the model's vocabulary and
  // the text, so rare characters are in the atlas too). Cheap; rebuild happens later.
  void request(float size_px, const std::string& extra_chars);
  bool needs_rebuild() const { return dirty_; }
  // Rebuilds the atlas and its GL texture. Call between frames (before ImGui::NewFrame).
  void rebuild();
  const Fonts& fonts() const { return fonts_; }

 private:
  Fonts fonts_;
  float want_size_ = 16.f;
  std::string want_chars_;
  std::string built_chars_;
  bool dirty_ = true;
  bool gl_ready_ = false;
  ImVector<ImWchar> ranges_;  // must outlive the atlas
};

}  // namespace attnviz::ui
