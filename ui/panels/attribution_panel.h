// Direct logit attribution: at one position (the query, or one typed) the logit of one token
// (the predicted one, or one typed, or the difference of two) split along the residual
// stream into each head's output (an L × H grid, diverging colours), each layer's MLP (a bar
// per layer), the embeddings and the rest (biases), with the final norm's scale frozen at
// the run's value. Computed on a thread of its own (AttributionJob) whenever the trace or
// the choice changes. Bad input (a target the tokenizer cannot produce as one token, a
// position outside the text) is a message under the control.
#pragma once
#include "ui/jobs/lens_job.h"
#include "ui/panels/panel.h"

namespace attnviz::ui {

class AttributionPanel : public JobGridPanel<AttributionJob> {
 public:
  AttributionPanel() : JobGridPanel("Direct logit attribution", /*open=*/false) {}
  AttributionJob::Status status() const { return job_.status(); }

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  // The query from the controls; false (with the messages set) when the input is bad.
  bool read_controls(FrameContext& ctx, AttributionQuery& q);
  void draw_parts(FrameContext& ctx, const Attribution& a);

  int position_ = -1;  // −1: the selected query (the last token unless the text view chose one)
  char target_a_[64] = "", target_b_[64] = "";
  std::string position_error_, target_error_;
};

}  // namespace attnviz::ui
