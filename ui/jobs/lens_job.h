// The logit lens and the direct logit attribution computed off the UI thread, for the
// Logit lens and Direct logit attribution panels. Each reads the worker's published trace
// (shared, immutable) on a thread of its own; a newer request cancels the running one. No
// ImGui.
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/engine/lens.h"
#include "core/model/model.h"

namespace attnviz::ui {

// One function at a time on a thread of its own; start() cancels (through the flag it
// hands the function) and joins the one running first.
class BackgroundJob {
 public:
  BackgroundJob() = default;
  ~BackgroundJob() { stop(); }
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;

  void start(std::function<void(const std::atomic<bool>& cancel)> fn);
  void stop();  // cancels and joins
  bool idle() const { return !running_.load(); }

 private:
  std::thread thread_;
  std::atomic<bool> cancel_{false}, running_{false};
};

// The lens of every layer at one position: cells[l], l = 0 … L−1.
struct LensRow {
  std::vector<LensCell> cells;
};

constexpr int kLensTop = 10;  // tokens kept per cell (the hover shows them)

// Whether row `i` of the lens of `a` holds for `b`: the same model run (ablation, window
// start) and the same tokens up to i and at i + 1 (the next token, whose probability and
// rank the row shows). Typing at the end keeps every row but the last one or two.
bool lens_row_carries(const Trace& a, const Trace& b, int i);

// The lens rows of the positions a panel shows, for the newest trace. Rows that still hold
// are kept across traces (lens_row_carries); the others are computed on the job's thread,
// a few positions at a time through every layer, the positions in the order asked.
class LensJob {
 public:
  // Asks for the rows of `positions` of `trace`; returns at once. Rows already there (or
  // being computed) are not computed again.
  void request(std::shared_ptr<const Model> model, std::shared_ptr<const Trace> trace, const std::vector<int>& positions);
  // Row `i` of the newest requested trace, null when not computed (yet).
  std::shared_ptr<const LensRow> row(int i) const;
  std::string error() const;  // why the last computation failed ("" when it did not)
  bool idle() const { return job_.idle(); }
  int pending() const { return pending_.load(); }  // positions asked for and not computed yet
  void stop() { job_.stop(); }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const Model> model_;
  std::shared_ptr<const Trace> trace_;
  std::map<int, std::shared_ptr<const LensRow>> rows_;
  std::vector<int> computing_;  // positions the running job was given
  std::string error_;
  std::atomic<int> pending_{0};
  BackgroundJob job_;  // last: joined before the members it writes go
};

// A target typed as text: the one id the model's tokenizer gives it. Throws an Error that
// says why otherwise (no tokenizer, empty, or several tokens).
int target_token_id(const Model& m, const std::string& text);

// The direct logit attribution of one position and target, computed on a thread.
struct AttributionQuery {
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Trace> trace;
  int position = -1;            // −1: the last
  std::vector<int> target_ids;  // empty: the predicted token at the position; else A or A, B
  bool keys = false;            // also carry each head's share back to its keys (key_attribution)
  bool operator==(const AttributionQuery& o) const {
    return model == o.model && trace == o.trace && position == o.position && target_ids == o.target_ids &&
           keys == o.keys;
  }
};

class AttributionJob {
 public:
  void request(const AttributionQuery& q);  // nothing when q is the last request
  struct Status {
    std::shared_ptr<const Attribution> result;  // of `query` (null while computing or failed)
    std::shared_ptr<const KeyAttribution> keys;  // the same by key, when the query asked (else null)
    AttributionQuery query;                      // the newest request: result and keys answer it
    std::string error;
    bool running = false;
  };
  Status status() const;
  bool idle() const { return job_.idle(); }
  void stop() { job_.stop(); }

 private:
  mutable std::mutex mu_;
  AttributionQuery query_;
  std::shared_ptr<const Attribution> result_;
  std::shared_ptr<const KeyAttribution> keys_;
  std::string error_;
  BackgroundJob job_;
};

}  // namespace attnviz::ui
