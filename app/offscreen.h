// `attnviz --headless`: the GUI drawn into an offscreen framebuffer of a headless OpenGL
// context (EGL, core/gpu/gl_context.h) instead of a GLFW window, so that screenshots and
// --type timings run where there is no display server: a GPU machine with a driver and no
// X, or Mesa's llvmpipe. Built with the GPU backend (ATTNVIZ_GPU), which brings EGL.
#pragma once
#include <memory>
#include <string>

namespace attnviz {

class Offscreen {
 public:
  // A width × height RGBA8 colour buffer, bound as the draw and read framebuffer, its
  // context current on this thread until destruction. Throws attnviz::Error saying why.
  Offscreen(int width, int height);
  ~Offscreen();
  Offscreen(const Offscreen&) = delete;
  Offscreen& operator=(const Offscreen&) = delete;

  int width() const { return width_; }
  int height() const { return height_; }
  const std::string& renderer() const;  // GL_RENDERER, e.g. "NVIDIA H200/PCIe/SSE2"

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int width_, height_;
};

}  // namespace attnviz
