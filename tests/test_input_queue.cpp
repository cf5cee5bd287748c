// The input queue: a burst of key taps and characters that arrives within one frame reaches
// the text box complete and in order, one key transition per frame.
//
// The frames are simulated as Dear ImGui 1.86 sees them: a key counts as pressed in a frame
// when it is down at the frame's start and was up at the previous one (io.KeysDown sampled
// once per frame), and a frame's characters are applied before its key presses.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "ui/state/input_queue.h"

namespace attnviz::ui {
namespace {

constexpr int kBackspace = 259, kLetterA = 65;  // GLFW_KEY_BACKSPACE, GLFW_KEY_A

InputEvent key(int k, int action) {
  InputEvent e;
  e.key = k;
  e.action = action;
  return e;
}
InputEvent chr(char c) {
  InputEvent e;
  e.kind = InputEvent::Char;
  e.codepoint = static_cast<unsigned char>(c);
  return e;
}

// A text box driven frame by frame, as ImGui 1.86 would drive it.
struct SimulatedTextBox {
  std::string text;
  std::map<int, bool> down, was_down;
  int presses = 0;
  // One frame with these events applied before it starts.
  void frame(const std::vector<InputEvent>& events) {
    std::string chars;
    for (const InputEvent& e : events) {
      if (e.kind == InputEvent::Char)
        chars += static_cast<char>(e.codepoint);
      else
        down[e.key] = e.action != InputQueue::kRelease;
    }
    text += chars;  // characters first
    for (auto& [k, d] : down) {
      if (d && !was_down[k]) {
        ++presses;
        if (k == kBackspace && !text.empty()) text.pop_back();
      }
      was_down[k] = d;
    }
  }
};

// "hello" typed, then 60 BackSpace taps, then "ok": all within one slow frame.
std::vector<InputEvent> burst() {
  std::vector<InputEvent> v;
  for (char c : std::string("hello")) v.push_back(chr(c));
  for (int i = 0; i < 60; ++i) {
    v.push_back(key(kBackspace, InputQueue::kPress));
    v.push_back(key(kBackspace, InputQueue::kRelease));
  }
  for (char c : std::string("ok")) v.push_back(chr(c));
  return v;
}

TEST(InputQueue, ABurstWithinOneFrameArrivesWhole) {
  InputQueue q;
  for (const InputEvent& e : burst()) q.push(e);
  SimulatedTextBox box;
  int frames = 0;
  while (!q.empty() && frames < 1000) {
    box.frame(q.take_frame());
    ++frames;
  }
  box.frame({});
  EXPECT_EQ(box.presses, 60);  // every tap seen
  EXPECT_EQ(box.text, "ok");   // "hello" deleted (and 55 taps on an empty box), then "ok"
  EXPECT_EQ(frames, 120);      // one transition of a key per frame: 2 frames per tap; the characters ride along
}

// The same burst fed to ImGui directly, as its GLFW backend does: taps are lost. This is
// what the queue fixes, and shows the simulation above can fail.
TEST(InputQueue, WithoutTheQueueTapsAreLost) {
  SimulatedTextBox box;
  box.frame(burst());
  box.frame({});
  EXPECT_EQ(box.presses, 0);
  EXPECT_EQ(box.text, "hellook");
}

TEST(InputQueue, CharactersTypedAfterAKeyWaitForTheNextFrame) {
  InputQueue q;
  q.push(chr('a'));
  q.push(key(kBackspace, InputQueue::kPress));
  q.push(chr('b'));
  q.push(key(kBackspace, InputQueue::kRelease));
  auto f1 = q.take_frame();
  ASSERT_EQ(f1.size(), 2u);  // 'a', then the press; 'b' came after the press
  EXPECT_EQ(f1[0].kind, InputEvent::Char);
  EXPECT_EQ(f1[1].action, InputQueue::kPress);
  auto f2 = q.take_frame();
  ASSERT_EQ(f2.size(), 2u);  // 'b', the release
  EXPECT_EQ(f2[0].codepoint, static_cast<unsigned>('b'));
  EXPECT_TRUE(q.empty());
}

TEST(InputQueue, DifferentKeysShareAFrameAndRepeatsAreDropped) {
  InputQueue q;
  q.push(key(kLetterA, InputQueue::kPress));
  q.push(key(kLetterA, InputQueue::kRepeat));
  q.push(key(kBackspace, InputQueue::kPress));
  q.push(key(kLetterA, InputQueue::kRelease));
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.take_frame().size(), 2u);  // A down, BackSpace down; A's release next frame
  EXPECT_EQ(q.take_frame().size(), 1u);
  EXPECT_TRUE(q.take_frame().empty());
}

// A fast Ctrl+Q, as X delivers it: Ctrl down (one frame), then Q down, Ctrl up, Q up
// together. The frame that sees Q pressed must still see Ctrl down.
TEST(InputQueue, AShortcutTypedFastKeepsItsModifier) {
  constexpr int kCtrl = 341, kQ = 81;  // GLFW_KEY_LEFT_CONTROL, GLFW_KEY_Q
  InputQueue q;
  SimulatedTextBox box;
  q.push(key(kCtrl, InputQueue::kPress));
  box.frame(q.take_frame());
  for (const InputEvent& e :
       {key(kQ, InputQueue::kPress), key(kCtrl, InputQueue::kRelease), key(kQ, InputQueue::kRelease)})
    q.push(e);
  box.frame(q.take_frame());
  EXPECT_TRUE(box.down[kQ] && box.down[kCtrl]) << "Q pressed without Ctrl";
  box.frame(q.take_frame());
  EXPECT_FALSE(box.down[kQ] || box.down[kCtrl]);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace attnviz::ui
