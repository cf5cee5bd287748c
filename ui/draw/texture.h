// An RGBA8 OpenGL texture for heatmaps: uploaded once per change, drawn with
// ImGui::Image. Nearest filtering, so every matrix cell stays a sharp square.
#pragma once
#include <imgui.h>

#include <cstdint>
#include <vector>

namespace attnviz::ui {

class Texture {
 public:
  Texture() = default;
  ~Texture();
  Texture(const Texture&) = delete;
  Texture& operator=(const Texture&) = delete;
  Texture(Texture&& o) noexcept;
  Texture& operator=(Texture&& o) noexcept;

  // rgba: (h, w, 4) bytes, row 0 at the top.
  void upload(int w, int h, const std::vector<uint8_t>& rgba);
  // Rows [y0, y0 + rows) of the texture uploaded before, from rgba (the whole (h, w, 4) image).
  void update_rows(int y0, int rows, const std::vector<uint8_t>& rgba);
  ImTextureID id() const { return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(tex_)); }
  bool valid() const { return tex_ != 0; }
  int width() const { return w_; }
  int height() const { return h_; }

 private:
  unsigned tex_ = 0;  // GLuint
  int w_ = 0, h_ = 0;
};

// Draws an opaque texture (alpha 255 everywhere) between a and b without blending, so a
// software renderer does not read what lies under it; the draw list's render state is
// reset after it. Blended as ImGui draws images when the style fades the window (its
// alpha below 1).
void add_opaque_image(ImDrawList* dl, ImTextureID id, ImVec2 a, ImVec2 b, ImVec2 uv0 = ImVec2(0, 0),
                      ImVec2 uv1 = ImVec2(1, 1));

}  // namespace attnviz::ui
