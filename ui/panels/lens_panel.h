// The logit lens: a token × layer grid, each cell the token the residual stream after that
// layer at that position would predict (through the final norm and the unembedding),
// shaded by its probability; or, with the toggle, the rank of the token that actually comes
// next. Hover a cell for its top 10 and the next token's probability. Only the rows in view
// are computed (LensJob, on a thread of its own, a newer trace cancelling it); rows whose
// tokens did not change are kept while typing, and the grid follows the query (the last
// token unless the text view chose one).
#pragma once
#include "ui/jobs/lens_job.h"
#include "ui/panels/panel.h"

namespace attnviz::ui {

class LensPanel : public JobGridPanel<LensJob> {
 public:
  LensPanel() : JobGridPanel("Logit lens", /*open=*/false) {}
  int rows_shown() const { return rows_shown_; }  // rows drawn last frame with their cells computed
  std::string error() const { return job_.error(); }

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  void draw_grid(FrameContext& ctx, int query);
  void cell_tooltip(const FrameContext& ctx, int i, int l, const LensCell& c) const;

  bool show_rank_ = false;
  uint64_t followed_serial_ = 0;  // the trace the scroll last followed the query for
  int followed_query_ = -2;
  int follow_frames_ = 0;
  int rows_shown_ = 0;
};

}  // namespace attnviz::ui
