// Circuits: composition between heads (core/engine/composition.h) as a graph. Heads are
// nodes in the layer × head grid (layers left to right), coloured by what the current text
// says they do (previous-token, induction, first-token, self); an edge joins an earlier head
// to a later one where the chosen composition (K, Q, V or the largest of the three) passes
// the slider's threshold. Hovering an edge shows its three scores; clicking a node selects
// the head. Computed once per model on a thread (CompositionJob).
#pragma once
#include "ui/jobs/analysis_jobs.h"
#include "ui/panels/panel.h"

namespace attnviz::ui {

class CircuitsPanel : public Panel {
 public:
  CircuitsPanel() : Panel("Circuits", /*open=*/false) {}
  bool idle() const { return job_.idle(); }
  CompositionJob::Status status() const { return job_.status(); }
  ImVec4 graph_rect() const { return graph_rect_; }
  int edges_shown() const { return edges_shown_; }

 protected:
  void draw_content(FrameContext& ctx) override;
  bool needs_trace() const override { return false; }

 private:
  CompositionJob job_;
  int kind_ = 0;            // 0 K, 1 Q, 2 V, 3 the largest
  float threshold_ = -1.f;  // −1: set from the model's scores once (the 24th strongest edge)
  const Composition* thresholded_for_ = nullptr;
  ImVec4 graph_rect_{0, 0, 0, 0};
  int edges_shown_ = 0;
};

}  // namespace attnviz::ui
