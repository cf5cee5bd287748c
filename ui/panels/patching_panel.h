// Activation patching: prompt B's activations put into a run of prompt A one cell at a time,
// and what that does to one number at one position of A (the logit of a target token, the
// predicted one by default, or the difference of two targets' logits). Two grids: each
// head's output at every position (layers × heads), or the residual stream entering a layer
// at one position (layers × positions); each cell shows the change from A's own value
// (diverging colours: red raises the metric). Computed on a thread of its own (PatchJob)
// with progress and a stop button, again whenever either prompt or a control changes; a
// grid whose estimated cost is large waits for its button, so typing never competes with it.
// Bad input (no prompt B, token counts that differ, a target the tokenizer cannot produce as
// one token, a position outside the text) is a message under the controls.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ui/panels/panel.h"
#include "ui/jobs/patch_job.h"
#include "ui/draw/texture.h"

namespace attnviz::ui {

class PatchingPanel : public JobGridPanel<PatchJob> {
 public:
  PatchingPanel() : JobGridPanel("Activation patching", /*open=*/false) {}
  // Prompt B's newest answer (App sets it every frame; null while there is no other prompt).
  void set_other(std::shared_ptr<const Snapshot> other) { other_ = std::move(other); }
  void set_kind(PatchKind k) { kind_ = k == PatchKind::Heads ? 0 : 1; }
  // Computes the first grid whatever its cost (the command line asked for the panel).
  void compute_at_start() { asked_ = true; }
  PatchJob::Status status() const { return job_.status(); }
  PatchKind kind() const { return kind_ == 0 ? PatchKind::Heads : PatchKind::Resid; }
  const std::string& message() const { return message_; }  // the input's problem shown last frame ("" if none)
  int frames_while_running() const { return frames_running_; }  // frames drawn while a grid computed

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  // The query from the controls and the prompts; false (with message_ set) when it cannot run.
  bool read_controls(FrameContext& ctx, PatchQuery& q);
  void draw_grid(FrameContext& ctx, const PatchJob::Status& st, bool stale);

  std::shared_ptr<const Snapshot> other_;
  int kind_ = 0;       // 0: heads, 1: residual stream
  int position_ = -1;  // −1: the selected query (the last token unless the text view chose one)
  char target_a_[64] = "", target_b_[64] = "";
  std::string message_;
  bool asked_ = false;  // the button was pressed (or the command line asked) for the current input
  int frames_running_ = 0;
  Texture tex_;
  std::shared_ptr<const PatchResult> uploaded_;  // the grid in tex_
  std::vector<float> change_;                    // (L, cols) metric − clean of uploaded_
  float range_ = 1.f;                            // the colours' symmetric range
  std::vector<uint8_t> rgba_;
};

}  // namespace attnviz::ui
