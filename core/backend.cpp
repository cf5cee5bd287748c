#include "core/backend.h"

#include "core/error.h"

namespace attnviz {

std::unique_ptr<Backend> make_backend(const std::string& name, std::string* fallback_note) {
  if (fallback_note) fallback_note->clear();
  if (name == "cpu") return make_cpu_backend();
  if (name == "gpu") {
    if (fallback_note) *fallback_note = "the GPU backend is not part of this build; running on the CPU";
    return make_cpu_backend();
  }
  throw Error("unknown backend '" + name + "' (choose cpu or gpu)", ErrorKind::Usage);
}

}  // namespace attnviz
