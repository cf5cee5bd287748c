// "Why this score": the selected head's score from the query to a key (the heatmap cell
// clicked last, else the query row's strongest key) split into what wrote the query side ×
// what wrote the key side (core/engine/score_attribution.h): the largest terms as bars, each
// side's parts summed over the other side, and the grid of the top parts. Clicking a head's
// part selects that head. Computed on a thread (ScoreJob) whenever the trace or the cell changes.
#pragma once
#include "ui/jobs/analysis_jobs.h"
#include "ui/panels/panel.h"

namespace attnviz::ui {

class WhyScorePanel : public Panel {
 public:
  WhyScorePanel() : Panel("Why this score", /*open=*/false) {}
  bool idle() const { return job_.idle(); }
  ScoreJob::Status status() const { return job_.status(); }
  ImVec4 bars_rect() const { return bars_rect_; }  // (x, y, w, h) of the term bars drawn last frame

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  // The cell to explain, or false (with `why` set) when there is none.
  bool cell(FrameContext& ctx, ScoreQuery& q, std::string& why) const;
  void draw_terms(FrameContext& ctx, const ScoreAttribution& a);
  void draw_sides(FrameContext& ctx, const ScoreAttribution& a);
  void draw_grid(FrameContext& ctx, const ScoreAttribution& a);
  // A part's name, clickable when it is a head (selects it).
  void part_button(FrameContext& ctx, const StreamPart& p, const char* id);

  ScoreJob job_;
  ImVec4 bars_rect_{0, 0, 0, 0};
};

}  // namespace attnviz::ui
