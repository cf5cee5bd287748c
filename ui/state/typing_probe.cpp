#include "ui/state/typing_probe.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/tokenize/tokenizer.h"

namespace attnviz::ui {

TypingProbe::TypingProbe(const std::string& keys) : keys_(utf8_split(keys)) {}

std::string TypingProbe::press(Clock::time_point now) {
  if (waiting_ || next_ >= keys_.size()) return "";
  waiting_ = true;
  serial_ = 0;
  pressed_at_ = now;
  return keys_[next_++];
}

void TypingProbe::presented(uint64_t shown, double forward_ms, double ui_ms, double draw_ms, Clock::time_point now) {
  if (!waiting_ || serial_ == 0 || shown < serial_) return;
  latency_ms_.push_back(std::chrono::duration<double, std::milli>(now - pressed_at_).count());
  forward_ms_.push_back(forward_ms);
  ui_ms_.push_back(ui_ms);
  draw_ms_.push_back(draw_ms);
  waiting_ = false;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t k = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(k, v.size() - 1)];
}

std::string TypingProbe::report_json() const {
  nlohmann::json j;
  j["keys"] = latency_ms_.size();
  j["latency_ms"] = latency_ms_;
  j["forward_ms"] = forward_ms_;
  j["ui_ms"] = ui_ms_;
  j["draw_ms"] = draw_ms_;
  j["median_ms"] = quantile(latency_ms_, 0.5);
  j["p90_ms"] = quantile(latency_ms_, 0.9);
  j["max_ms"] = latency_ms_.empty() ? 0.0 : *std::max_element(latency_ms_.begin(), latency_ms_.end());
  return j.dump();
}

}  // namespace attnviz::ui
