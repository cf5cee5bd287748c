#include "ui/jobs/wake.h"

#include <chrono>

namespace attnviz::ui {

namespace {
std::atomic<void (*)()> g_wake{nullptr};
}  // namespace

void set_wake_ui(void (*fn)()) { g_wake.store(fn); }

void wake_ui() {
  if (void (*fn)() = g_wake.load()) fn();
}

void WakeThrottle::maybe_wake(int min_ms) {
  const int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
  int64_t last = last_ms_.load();
  if (now - last < min_ms) return;
  if (last_ms_.compare_exchange_strong(last, now)) wake_ui();
}

}  // namespace attnviz::ui
