// Simulated typing, to measure keystroke-to-frame latency (`attnviz --type TEXT`). One
// character at a time is appended to the text; its clock starts when the key is "pressed"
// (the frame that handles it begins) and stops when the first frame that shows the
// worker's answer to it has been presented. The next key is pressed only then, as a
// fast typist who waits for each result would. No ImGui, no GL.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace attnviz::ui {

// The q-quantile of v (nearest rank), 0 when empty.
double quantile(std::vector<double> v, double q);

class TypingProbe {
 public:
  using Clock = std::chrono::steady_clock;

  explicit TypingProbe(const std::string& keys);  // UTF-8; each character is one key

  bool finished() const { return next_ >= keys_.size() && !waiting_; }
  // At the start of a frame: the character to type now, or "" (one is still waiting for
  // its frame, or all were typed).
  std::string press(Clock::time_point now);
  // After the frame that handled the key: the serial of the request it posted.
  void posted(uint64_t serial) { serial_ = serial; }
  // After a frame was presented: `shown` = the request serial of the result it drew,
  // `forward_ms` = that result's compute time, `ui_ms` = building that frame's UI on the
  // CPU (panels, ImGui), `draw_ms` = drawing and presenting it (OpenGL, swap, finish).
  void presented(uint64_t shown, double forward_ms, double ui_ms, double draw_ms, Clock::time_point now);

  const std::vector<double>& latency_ms() const { return latency_ms_; }
  const std::vector<double>& forward_ms() const { return forward_ms_; }
  // {"keys": n, "latency_ms": [...], "forward_ms": [...], "ui_ms": [...], "draw_ms": [...],
  //  "median_ms": m, "p90_ms": p, "max_ms": x} (the last three of latency_ms)
  std::string report_json() const;

 private:
  std::vector<std::string> keys_;
  size_t next_ = 0;
  bool waiting_ = false;
  uint64_t serial_ = 0;  // 0 until the frame that handled the key posted it
  Clock::time_point pressed_at_;
  std::vector<double> latency_ms_, forward_ms_, ui_ms_, draw_ms_;
};

}  // namespace attnviz::ui
