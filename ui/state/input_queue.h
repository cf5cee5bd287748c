// Key and character events queued between the window's callbacks and Dear ImGui, so that no
// short press is lost when a frame takes longer than the press.
//
// Dear ImGui 1.86 (Debian's) keeps only whether a key is down (io.KeysDown), sampled once a
// frame: a key pressed and released within one frame is never seen as pressed. The GLFW
// callbacks push every event here instead; each frame takes the events up to the first one
// that would change a key a second time (a quick tap's release waits for the next frame);
// a modifier released after a key press waits too (Ctrl+Q typed fast), and so do characters
// after a key press, so the text box applies them in
// the order they were typed (ImGui applies a frame's characters before its key presses).
// No GLFW or ImGui: keys are plain ints (GLFW's codes), unit-tested in
// tests/test_input_queue.cpp.
#pragma once
#include <cstddef>
#include <deque>
#include <vector>

namespace attnviz::ui {

struct InputEvent {
  enum Kind { Key, Char } kind = Key;
  int key = 0, scancode = 0, action = 0, mods = 0;  // Key: GLFW's key, scancode, action and mods
  unsigned codepoint = 0;                           // Char
};

class InputQueue {
 public:
  // GLFW's actions: 0 release, 1 press, 2 repeat.
  static constexpr int kRelease = 0, kPress = 1, kRepeat = 2;

  // From the window's callbacks (the main thread). Repeats are dropped: ImGui 1.86 repeats
  // a held key itself.
  void push(const InputEvent& e);
  // The events to feed ImGui this frame, in order (see the header comment).
  std::vector<InputEvent> take_frame();
  bool empty() const { return q_.empty(); }
  size_t size() const { return q_.size(); }

 private:
  std::deque<InputEvent> q_;
};

}  // namespace attnviz::ui
