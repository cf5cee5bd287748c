// Activation patching off the UI thread, for the Patching panel: the grid of
// core/engine/patch.h (prompt B's head outputs, or B's residual stream, put into a run of
// prompt A one cell at a time) computed on a thread of its own (BackgroundJob), with
// progress and cancel; a request that differs from the last (either prompt, the grid, the
// position, the targets) cancels the running one and starts again. No ImGui.
//
// Dimension letters as in core/model/config.h: L layers, H query heads, T tokens.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/engine/patch.h"
#include "core/model/model.h"
#include "ui/jobs/lens_job.h"

namespace attnviz::ui {

struct PatchQuery {
  std::shared_ptr<const Model> model;
  std::vector<int> a, b;  // (T) each: the ids of prompt A's window and of prompt B's
  PatchRequest request;   // kind, position (−1: the last), target ids (empty: A's prediction)
  bool operator==(const PatchQuery& o) const;
  bool operator!=(const PatchQuery& o) const { return !(*this == o); }
};

// The targets typed as text: A alone (its logit), A and B (the logit difference A − B), or
// none (A's predicted token). Each must be one token of the model's tokenizer
// (target_token_id); B without A is refused. Throws an Error that says why.
std::vector<int> patch_targets(const Model& m, const std::string& a, const std::string& b);

// Why two windows cannot be patched into each other, "" when they can: none yet, or token
// counts that differ (patching takes activations position by position).
std::string patch_alignment_problem(int ta, int tb);

// A rough cost of the grid in GFLOP (2 · parameters per recomputed row): the two clean runs,
// then a head pass per head over rows [first_diff, T) of layers l … L−1, or a stream pass per
// layer and position t in [first_diff, position] over rows [t, T). Cells B leaves equal to A
// (before first_diff) and stream cells after the position run no pass.
double patch_cost_gflop(const Model& m, int T, int first_diff, int position, PatchKind kind);

class PatchJob {
 public:
  // Starts the grid of `q` unless it is the last request (then nothing, whether it is
  // running, done, failed or was stopped); `again` starts it even then.
  void request(const PatchQuery& q, bool again = false);
  // Cancels the running grid (it stays the last request: request() does not restart it).
  void stop() { job_.stop(); }
  struct Status {
    std::shared_ptr<const PatchResult> result;  // the last complete grid (null before one)
    PatchQuery result_query;                    // what it was computed for
    bool current = false;                       // result answers the last request
    std::string error;                          // why the last request failed ("" if not)
    bool running = false;
    bool stopped = false;                       // the last request was cancelled by stop()
    int done = 0, total = 0;                    // cells of the running grid
    double ms = 0;                              // wall time of the last complete grid
  };
  Status status() const;
  bool idle() const { return job_.idle(); }

 private:
  mutable std::mutex mu_;
  PatchQuery asked_;
  uint64_t asked_serial_ = 0;  // counts request() starts: an older run publishes nothing
  PatchQuery result_query_;
  std::shared_ptr<const PatchResult> result_;
  bool current_ = false;
  std::string error_;
  double ms_ = 0;
  std::atomic<int> done_{0}, total_{0};
  BackgroundJob job_;  // last: joined before the members it writes go
};

}  // namespace attnviz::ui
