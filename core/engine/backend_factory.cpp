#include "core/engine/backend.h"

#include "core/error.h"
#ifdef ATTNVIZ_HAS_GPU
#include "core/gpu/gl_backend.h"
#endif

namespace attnviz {

std::unique_ptr<Backend> make_backend(const std::string& name, std::string* fallback_note) {
  if (fallback_note) fallback_note->clear();
  if (name == "cpu") return make_cpu_backend();
  if (name == "gpu") {
#ifdef ATTNVIZ_HAS_GPU
    try {
      return make_gl_backend();
    } catch (const std::exception& e) {
      if (fallback_note) *fallback_note = std::string("GPU backend unavailable: ") + e.what() + "; running on the CPU";
      return make_cpu_backend();
    }
#else
    if (fallback_note) *fallback_note = "the GPU backend is not part of this build; running on the CPU";
    return make_cpu_backend();
#endif
  }
  throw Error("unknown backend '" + name + "' (choose cpu or gpu)", ErrorKind::Usage);
}

}  // namespace attnviz
