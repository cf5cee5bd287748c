// Head statistics on the current text as a sortable table, one row per (layer, head):
// entropy of the attention rows (bits), mean distance looked back, weight on the first
// token (sink), on the diagonal, on the previous token, and the induction score (see
// core/engine/head_scores.h). Click a column header to sort, a row to select the head.
#pragma once
#include <vector>

#include "core/engine/head_scores.h"
#include "ui/panels/panel.h"

namespace attnviz::ui {

class HeadStatsPanel : public Panel {
 public:
  HeadStatsPanel() : Panel("Head statistics") {}

 protected:
  void draw_content(FrameContext& ctx) override;

 private:
  void sort_rows(int column, bool ascending);

  uint64_t serial_ = 0;            // trace the rows describe
  std::vector<HeadScore> rows_;    // (L · H), in the table's order
};

}  // namespace attnviz::ui
