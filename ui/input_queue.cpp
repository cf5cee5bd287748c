#include "ui/input_queue.h"

#include <algorithm>

namespace attnviz::ui {

void InputQueue::push(const InputEvent& e) {
  if (e.kind == InputEvent::Key && e.action == kRepeat) return;  // ImGui 1.86 repeats held keys itself
  q_.push_back(e);
}

std::vector<InputEvent> InputQueue::take_frame() {
  std::vector<InputEvent> out;
  std::vector<int> changed;  // keys that changed state in this frame
  bool pressed = false;      // a key went down in this frame
  while (!q_.empty()) {
    const InputEvent& e = q_.front();
    if (e.kind == InputEvent::Char) {
      if (pressed) break;  // typed after the press: next frame, so the order stays
    } else {
      if (std::find(changed.begin(), changed.end(), e.key) != changed.end()) break;
      changed.push_back(e.key);
      pressed = pressed || e.action == kPress;
    }
    out.push_back(e);
    q_.pop_front();
  }
  return out;
}

}  // namespace attnviz::ui
