// The model's guess for the next token: top-k probabilities at the last position (or at a
// hovered token's, with what actually came next) as bars,
// a temperature slider, and step-by-step generation that appends sampled tokens to the
// text, so a class can watch the window slide once the text outgrows block_size. With an
// other prompt (B) typed, its top few next tokens are shown under A's.
#pragma once
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ui/panels/panel.h"

namespace attnviz::ui {

class NextTokenPanel : public Panel {
 public:
  NextTokenPanel() : Panel("Next token") {}

  // One generation step: appends a token sampled from the last row's logits to the text.
  // Returns false when there is nothing to sample from yet.
  bool step(FrameContext& ctx, bool greedy);
  // Prompt B's newest answer (App sets it every frame; null while there is no other prompt).
  void set_other(std::shared_ptr<const Snapshot> other) { other_ = std::move(other); }

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  // Row `row`'s logits: the trace's own, or computed once per trace and row (row_values_).
  const float* logits_at(const FrameContext& ctx, int row);
  // One bar per token (with the ablation's comparison when `compare`; `next`, the token that
  // came next in the text, framed); a click appends the token to `text`, after `ran_text`.
  void draw_bars(FrameContext& ctx, const std::vector<TokenShift>& top, int next, bool compare, const std::string& ran_text,
                 std::string& text);
  // Prompt B's trace when it has run through the model shown (null otherwise), and its prediction.
  const Trace* other_trace(const FrameContext& ctx) const;
  void draw_other(FrameContext& ctx, const Trace& tb);
  static constexpr int kOtherTop = 5;  // bars of each prompt while B is shown
  // The top k of a row of logits, kept while they and the settings stay: a softmax over a
  // vocabulary of 150,000 costs a millisecond or two, every frame otherwise.
  struct TopCache {
    const float* logits = nullptr;
    uint64_t serial = 0;
    int row = -1;
    int k = -1;
    float temperature = -1.f;
    const float* clean = nullptr;  // the ablation's comparison, or null
    std::vector<TokenShift> top;
  };
  const std::vector<TokenShift>& top_of(TopCache& c, const float* logits, uint64_t serial, int row, int V, int k,
                                        float temperature, const float* clean);
  TopCache top_a_, top_b_;

  std::shared_ptr<const Snapshot> other_;

  std::vector<float> row_values_;
  int row_ = -1;
  uint64_t row_serial_ = 0;
  std::mt19937_64 rng_{1};
  uint64_t seeded_with_ = 1;
  bool playing_ = false;
  double last_step_time_ = 0.0;
  uint64_t stepped_on_serial_ = 0;  // the trace the last step sampled from (one step per result)
};

}  // namespace attnviz::ui
