// Training, live: pick the classroom preset or a shape, a corpus and the optimisation,
// then start, pause, resume, stop or reset a run that trains on its own thread
// (core/train/session.h). While it trains, its newest weights become the model of every
// panel every few steps; plots show the training and validation loss and each head's
// previous-token and induction scores, with the step where an induction head formed
// marked; a timeline slider goes back to any kept snapshot; the run saves as a checkpoint
// directory, and one head's weights at several steps export as a filmstrip (PNG or SVG).
#pragma once
#include <memory>
#include <string>

#include "core/train/session.h"
#include "ui/panels/panel.h"
#include "ui/state/training_state.h"

namespace attnviz::ui {

class TrainingPanel : public Panel {
 public:
  TrainingPanel();

  // The weights the other panels should show (the newest, or the snapshot picked on the
  // timeline); null while there is no run, or when "show in every panel" is off.
  std::shared_ptr<const Model> shown_model() const { return show_ ? shown_ : nullptr; }
  // Starts the form's run now (the GUI's --train-steps).
  void start(AppState& state, int steps);
  // True when no run is training.
  bool settled() const;
  std::shared_ptr<const SessionStatus> status() const { return session_.status(); }

 protected:
  void draw_content(FrameContext& ctx) override;
  bool needs_trace() const override { return false; }

 private:
  void draw_form();
  void draw_controls(FrameContext& ctx, const SessionStatus& st);
  void draw_plots(const SessionStatus& st);
  void draw_timeline(const SessionStatus& st);
  void draw_export(FrameContext& ctx, const SessionStatus& st);
  void choose_shown(const SessionStatus& st);

  TrainingSession session_;
  TrainingForm form_;
  std::shared_ptr<const SessionStatus> status_;
  std::shared_ptr<const Model> shown_;
  int shown_step_ = -1;
  bool show_ = true;    // the other panels show the training weights
  bool follow_ = true;  // ... the newest; else the snapshot at scrub_
  int scrub_ = 0;
  bool text_set_ = false;  // the text box was fitted to the run's vocabulary
  std::string message_;    // the last error or note of a button
  char corpus_buf_[512] = {};
  char save_buf_[512] = "attnviz-run";
  char film_buf_[512] = "filmstrip.png";
  int film_frames_ = 6;
};

}  // namespace attnviz::ui
