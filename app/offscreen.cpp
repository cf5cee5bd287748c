#include "app/offscreen.h"

#include <epoxy/gl.h>

#include "core/error.h"
#include "core/gpu/gl_context.h"

namespace attnviz {

struct Offscreen::Impl {
  GlContext ctx;
  GlContext::Current current{ctx};  // for the Offscreen's lifetime: the GUI draws on this thread
  GLuint fbo = 0, color = 0;
};

Offscreen::Offscreen(int width, int height) : impl_(std::make_unique<Impl>()), width_(width), height_(height) {
  glGenRenderbuffers(1, &impl_->color);
  glBindRenderbuffer(GL_RENDERBUFFER, impl_->color);
  glRenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, width, height);
  glGenFramebuffers(1, &impl_->fbo);
  glBindFramebuffer(GL_FRAMEBUFFER, impl_->fbo);
  glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, impl_->color);
  const GLenum status = glCheckFramebufferStatus(GL_FRAMEBUFFER);
  if (status != GL_FRAMEBUFFER_COMPLETE)
    throw Error("an offscreen framebuffer of " + std::to_string(width) + "x" + std::to_string(height) +
                " pixels is incomplete on '" + impl_->ctx.renderer() + "' (status 0x" + std::to_string(status) +
                ")\n  HINT: try a smaller --size.");
  // ImGui's renderer binds framebuffer 0 never, so this one stays bound for every frame.
}

Offscreen::~Offscreen() {
  glBindFramebuffer(GL_FRAMEBUFFER, 0);
  glDeleteFramebuffers(1, &impl_->fbo);
  glDeleteRenderbuffers(1, &impl_->color);
}

const std::string& Offscreen::renderer() const { return impl_->ctx.renderer(); }

}  // namespace attnviz
