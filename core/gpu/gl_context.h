// A headless OpenGL 4.3 core context of our own, through EGL's surfaceless platform
// (Mesa), else the default display, else the first GPU of EGL's device platform (NVIDIA
// without a display server), so the GPU backend needs no window and no X server. GL and EGL entry points come
// from libepoxy. The context is made current only for the duration of a `Current` scope,
// on whichever thread opens it, and released afterwards, so the engine may be driven from
// a worker thread (the GUI does) while another thread owns a window context.
#pragma once
#include <string>

namespace attnviz {

class GlContext {
 public:
  // Creates the display and a GL ≥ 4.3 core context. Throws attnviz::Error saying why
  // when that is impossible (no EGL, no surfaceless platform, GL too old, no compute).
  // The minimum version can be raised with env ATTNVIZ_GL_MIN_VERSION=MAJOR.MINOR (tests
  // use 9.9 to force the fallback path).
  GlContext();
  ~GlContext();
  GlContext(const GlContext&) = delete;
  GlContext& operator=(const GlContext&) = delete;

  // Makes the context current on this thread for the scope's lifetime; restores whatever
  // EGL context the thread had before (usually none) when it ends.
  class Current {
   public:
    explicit Current(const GlContext& c);
    ~Current();
    Current(const Current&) = delete;
    Current& operator=(const Current&) = delete;

   private:
    void* prev_display_;
    void* prev_context_;
    void* prev_draw_;
    void* prev_read_;
  };

  const std::string& renderer() const { return renderer_; }  // GL_RENDERER
  const std::string& version() const { return version_; }    // GL_VERSION
  int gl_version() const { return gl_version_; }              // e.g. 45 for 4.5
  long long max_ssbo_bytes() const { return max_ssbo_bytes_; }  // GL_MAX_SHADER_STORAGE_BLOCK_SIZE
  int max_shared_bytes() const { return max_shared_bytes_; }    // GL_MAX_COMPUTE_SHARED_MEMORY_SIZE
  int max_group_count() const { return max_group_count_; }      // min over x, y, z of GL_MAX_COMPUTE_WORK_GROUP_COUNT
  bool has_timer_query() const { return timer_bits_ > 0; }

 private:
  void probe();  // reads the version and limits; throws when they do not suffice

  void* display_ = nullptr;  // EGLDisplay
  void* context_ = nullptr;  // EGLContext
  std::string renderer_, version_;
  int gl_version_ = 0;
  long long max_ssbo_bytes_ = 0;
  int max_shared_bytes_ = 0, max_group_count_ = 0, timer_bits_ = 0;
};

}  // namespace attnviz
