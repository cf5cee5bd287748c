// Wakes the GUI's event loop from a thread off the UI thread: a background job that has
// finished (the model loader, the lens, patching, a scan, head importance, the store
// listing) calls wake_ui(), which calls what the GUI installed (glfwPostEmptyEvent in
// app/gui_main.cpp), so the frame that shows the result comes without input. Nothing is
// called while none is installed (unit tests, the command-line tool). No GLFW here.
#pragma once
#include <atomic>
#include <cstdint>

namespace attnviz::ui {

void set_wake_ui(void (*fn)());
void wake_ui();

// Progress reports: wakes at most once every `min_ms` milliseconds (thread-safe).
class WakeThrottle {
 public:
  void maybe_wake(int min_ms);

 private:
  std::atomic<int64_t> last_ms_{-1000000};
};

}  // namespace attnviz::ui
