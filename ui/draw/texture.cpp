#include "ui/draw/texture.h"

#include <GL/gl.h>

#include <utility>

namespace attnviz::ui {

Texture::~Texture() {
  if (tex_) glDeleteTextures(1, &tex_);
}

Texture::Texture(Texture&& o) noexcept : tex_(std::exchange(o.tex_, 0)), w_(o.w_), h_(o.h_) {}

Texture& Texture::operator=(Texture&& o) noexcept {
  if (this != &o) {
    if (tex_) glDeleteTextures(1, &tex_);
    tex_ = std::exchange(o.tex_, 0);
    w_ = o.w_;
    h_ = o.h_;
  }
  return *this;
}

void Texture::upload(int w, int h, const std::vector<uint8_t>& rgba) {
  if (w <= 0 || h <= 0 || rgba.size() < static_cast<size_t>(w) * static_cast<size_t>(h) * 4) return;
  if (!tex_) glGenTextures(1, &tex_);
  glBindTexture(GL_TEXTURE_2D, tex_);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
  glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba.data());
  w_ = w;
  h_ = h;
}

void Texture::update_rows(int y0, int rows, const std::vector<uint8_t>& rgba) {
  if (!tex_ || y0 < 0 || rows <= 0 || y0 + rows > h_ || rgba.size() < static_cast<size_t>(w_) * static_cast<size_t>(h_) * 4)
    return;
  glBindTexture(GL_TEXTURE_2D, tex_);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
  glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
  glTexSubImage2D(GL_TEXTURE_2D, 0, 0, y0, w_, rows, GL_RGBA, GL_UNSIGNED_BYTE,
                  rgba.data() + static_cast<size_t>(y0) * static_cast<size_t>(w_) * 4);
}

void add_opaque_image(ImDrawList* dl, ImTextureID id, ImVec2 a, ImVec2 b, ImVec2 uv0, ImVec2 uv1) {
  const bool faded = ImGui::GetStyle().Alpha < 1.f;
  if (!faded) dl->AddCallback([](const ImDrawList*, const ImDrawCmd*) { glDisable(GL_BLEND); }, nullptr);
  dl->AddImage(id, a, b, uv0, uv1);
  if (!faded) dl->AddCallback(ImDrawCallback_ResetRenderState, nullptr);
}

}  // namespace attnviz::ui
