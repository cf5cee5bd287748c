#include "ui/state/input_queue.h"

#include <algorithm>

namespace attnviz::ui {

namespace {
// Shift, Control, Alt and Super, left and right (GLFW_KEY_LEFT_SHIFT … GLFW_KEY_RIGHT_SUPER).
bool is_modifier(int key) { return key >= 340 && key <= 347; }
}  // namespace

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
      // Ctrl+Q arrives as Ctrl down, Q down, Ctrl up, Q up: the press must see Ctrl still down.
      if (pressed && e.action == kRelease && is_modifier(e.key)) break;
      changed.push_back(e.key);
      pressed = pressed || e.action == kPress;
    }
    out.push_back(e);
    q_.pop_front();
  }
  return out;
}

}  // namespace attnviz::ui
