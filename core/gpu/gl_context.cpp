#include "core/gpu/gl_context.h"

#include <dlfcn.h>
#include <epoxy/egl.h>
#include <epoxy/gl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace attnviz {

namespace {

bool has_word(const char* list, const char* word) {
  if (!list) return false;
  const size_t n = std::strlen(word);
  for (const char* p = list; (p = std::strstr(p, word)) != nullptr; p += n)
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
  return false;
}

std::string egl_error_name(EGLint e) {
  switch (e) {
    case EGL_SUCCESS: return "EGL_SUCCESS";
    case EGL_NOT_INITIALIZED: return "EGL_NOT_INITIALIZED";
    case EGL_BAD_ACCESS: return "EGL_BAD_ACCESS";
    case EGL_BAD_ALLOC: return "EGL_BAD_ALLOC";
    case EGL_BAD_ATTRIBUTE: return "EGL_BAD_ATTRIBUTE";
    case EGL_BAD_CONFIG: return "EGL_BAD_CONFIG";
    case EGL_BAD_CONTEXT: return "EGL_BAD_CONTEXT";
    case EGL_BAD_DISPLAY: return "EGL_BAD_DISPLAY";
    case EGL_BAD_MATCH: return "EGL_BAD_MATCH";
    case EGL_BAD_PARAMETER: return "EGL_BAD_PARAMETER";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "EGL error 0x%04x", static_cast<unsigned>(e));
      return buf;
    }
  }
}

// "4.3" → 43; 0 when unparsable.
int parse_version(const char* s) {
  int major = 0, minor = 0;
  if (!s || std::sscanf(s, "%d.%d", &major, &minor) < 1) return 0;
  return major * 10 + minor;
}

// The first GPU that EGL_EXT_platform_device lists and that initialises (NVIDIA's driver
// without a display server offers this rather than Mesa's surfaceless platform);
// EGL_NO_DISPLAY, with the reasons appended to `tried`, when there is none.
EGLDisplay open_device_display(const char* client_ext, std::string& tried, EGLint& major, EGLint& minor) {
  if (!has_word(client_ext, "EGL_EXT_platform_device") && !has_word(client_ext, "EGL_EXT_device_enumeration") &&
      !has_word(client_ext, "EGL_EXT_device_base")) {
    tried += "no EGL_EXT_platform_device";
    return EGL_NO_DISPLAY;
  }
  EGLDeviceEXT devices[16];
  EGLint n = 0;
  if (!eglQueryDevicesEXT(16, devices, &n) || n < 1) {
    tried += "no EGL devices (" + egl_error_name(eglGetError()) + ")";
    return EGL_NO_DISPLAY;
  }
  for (EGLint i = 0; i < n; ++i) {
    EGLDisplay dpy = eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, devices[i], nullptr);
    if (dpy != EGL_NO_DISPLAY && eglInitialize(dpy, &major, &minor)) return dpy;
    tried += "device " + std::to_string(i) + ": " + egl_error_name(eglGetError()) + "; ";
  }
  return EGL_NO_DISPLAY;
}

}  // namespace

GlContext::GlContext() {
  // epoxy aborts the process when asked for an entry point no library provides, so make
  // sure libEGL is there before the first EGL call.
  if (!dlopen("libEGL.so.1", RTLD_NOW | RTLD_GLOBAL))
    throw Error("libEGL.so.1 cannot be loaded (" + std::string(dlerror()) +
                ")\n  HINT: install the EGL loader and Mesa's EGL driver: apt install libegl1 libegl-mesa0 libgl1-mesa-dri");

  const char* client_ext = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
  EGLDisplay dpy = EGL_NO_DISPLAY;
  std::string tried;
  EGLint major = 0, minor = 0;
  if (has_word(client_ext, "EGL_EXT_platform_base") && has_word(client_ext, "EGL_MESA_platform_surfaceless")) {
    dpy = eglGetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
    if (dpy != EGL_NO_DISPLAY && !eglInitialize(dpy, &major, &minor)) {
      tried += "surfaceless platform: " + egl_error_name(eglGetError()) + "; ";
      dpy = EGL_NO_DISPLAY;
    }
  } else {
    tried += "no EGL_MESA_platform_surfaceless; ";
  }
  if (dpy == EGL_NO_DISPLAY) {
    dpy = eglGetDisplay(EGL_DEFAULT_DISPLAY);
    if (dpy != EGL_NO_DISPLAY && !eglInitialize(dpy, &major, &minor)) {
      tried += "default display: " + egl_error_name(eglGetError()) + "; ";
      dpy = EGL_NO_DISPLAY;
    }
  }
  if (dpy == EGL_NO_DISPLAY) dpy = open_device_display(client_ext, tried, major, minor);
  if (dpy == EGL_NO_DISPLAY)
    throw Error("no EGL display could be opened (" + tried +
                ")\n  HINT: install Mesa's EGL driver (libegl-mesa0, libgl1-mesa-dri), or a GPU driver's EGL "
                "(NVIDIA: its glvnd vendor file, __EGL_VENDOR_LIBRARY_FILENAMES).");
  display_ = dpy;
  if (!eglBindAPI(EGL_OPENGL_API))
    throw Error("this EGL cannot create desktop OpenGL contexts (eglBindAPI: " + egl_error_name(eglGetError()) + ")");

  const char* ext = eglQueryString(dpy, EGL_EXTENSIONS);
  if (!has_word(ext, "EGL_KHR_surfaceless_context"))
    throw Error("EGL lacks EGL_KHR_surfaceless_context, needed for a context without a window");
  EGLConfig config = EGL_NO_CONFIG_KHR;
  if (!has_word(ext, "EGL_KHR_no_config_context") && !has_word(ext, "EGL_MESA_configless_context")) {
    // No window: a display without one (a GPU's device platform) has no window configs,
    // which eglChooseConfig asks for by default.
    const EGLint want[] = {EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_NONE};
    const EGLint any[] = {EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_SURFACE_TYPE, 0, EGL_NONE};
    EGLint n = 0;
    if ((!eglChooseConfig(dpy, want, &config, 1, &n) || n < 1) && (!eglChooseConfig(dpy, any, &config, 1, &n) || n < 1))
      throw Error("EGL offers no configuration for desktop OpenGL (" + egl_error_name(eglGetError()) + ")");
  }
  const bool versioned = (major > 1 || minor >= 5) || has_word(ext, "EGL_KHR_create_context");
  const EGLint attribs_versioned[] = {EGL_CONTEXT_MAJOR_VERSION, 4, EGL_CONTEXT_MINOR_VERSION, 3,
                                      EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                                      EGL_NONE};
  const EGLint attribs_plain[] = {EGL_NONE};
  EGLContext ctx = eglCreateContext(dpy, config, EGL_NO_CONTEXT, versioned ? attribs_versioned : attribs_plain);
  if (ctx == EGL_NO_CONTEXT)
    throw Error("no OpenGL 4.3 core context could be created (" + egl_error_name(eglGetError()) +
                ")\n  HINT: the GPU backend needs OpenGL 4.3 compute shaders; Mesa's llvmpipe (libgl1-mesa-dri) has them.");
  context_ = ctx;
  try {
    probe();
  } catch (...) {
    eglDestroyContext(dpy, ctx);
    context_ = nullptr;
    throw;
  }
}

void GlContext::probe() {
  Current cur(*this);
  renderer_ = reinterpret_cast<const char*>(glGetString(GL_RENDERER));
  version_ = reinterpret_cast<const char*>(glGetString(GL_VERSION));
  gl_version_ = epoxy_gl_version();
  int need = 43;
  if (const char* env = std::getenv("ATTNVIZ_GL_MIN_VERSION"); env && *env) need = std::max(need, parse_version(env));
  if (gl_version_ < need)
    throw Error("OpenGL " + std::to_string(need / 10) + "." + std::to_string(need % 10) + " is needed, but '" + renderer_ +
                "' offers " + version_ +
                (need > 43 ? " (the minimum was raised by ATTNVIZ_GL_MIN_VERSION)" : ""));
  GLint64 ssbo = 0;
  glGetInteger64v(GL_MAX_SHADER_STORAGE_BLOCK_SIZE, &ssbo);
  max_ssbo_bytes_ = ssbo;
  glGetIntegerv(GL_MAX_COMPUTE_SHARED_MEMORY_SIZE, &max_shared_bytes_);
  max_group_count_ = 1 << 30;
  for (GLuint i = 0; i < 3; ++i) {
    GLint c = 0;
    glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_COUNT, i, &c);
    max_group_count_ = std::min(max_group_count_, c);
  }
  glGetQueryiv(GL_TIMESTAMP, GL_QUERY_COUNTER_BITS, &timer_bits_);
  if (glGetError() != GL_NO_ERROR || max_ssbo_bytes_ < (1 << 24) || max_shared_bytes_ < 16384)
    throw Error("'" + renderer_ + "' reports too small compute limits (storage block " + std::to_string(max_ssbo_bytes_) +
                " bytes, shared memory " + std::to_string(max_shared_bytes_) + " bytes)");
}

GlContext::~GlContext() {
  if (context_) eglDestroyContext(static_cast<EGLDisplay>(display_), static_cast<EGLContext>(context_));
  // The display is not terminated: EGL displays are shared process-wide (other backends,
  // the GUI), and eglTerminate would pull them from under their feet.
}

GlContext::Current::Current(const GlContext& c)
    : prev_display_(eglGetCurrentDisplay()),
      prev_context_(eglGetCurrentContext()),
      prev_draw_(eglGetCurrentSurface(EGL_DRAW)),
      prev_read_(eglGetCurrentSurface(EGL_READ)) {
  if (!eglMakeCurrent(static_cast<EGLDisplay>(c.display_), EGL_NO_SURFACE, EGL_NO_SURFACE,
                      static_cast<EGLContext>(c.context_)))
    throw Error("cannot make the GPU backend's OpenGL context current on this thread (" +
                egl_error_name(eglGetError()) + ")");
  prev_display_ = prev_context_ == EGL_NO_CONTEXT ? c.display_ : prev_display_;
}

GlContext::Current::~Current() {
  if (prev_context_ != EGL_NO_CONTEXT)
    eglMakeCurrent(static_cast<EGLDisplay>(prev_display_), static_cast<EGLSurface>(prev_draw_),
                   static_cast<EGLSurface>(prev_read_), static_cast<EGLContext>(prev_context_));
  else
    eglMakeCurrent(static_cast<EGLDisplay>(prev_display_), EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
}

}  // namespace attnviz
