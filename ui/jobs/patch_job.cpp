#include "ui/jobs/patch_job.h"

#include <algorithm>
#include <chrono>

#include "core/engine/backend.h"
#include "core/error.h"

namespace attnviz::ui {

bool PatchQuery::operator==(const PatchQuery& o) const {
  return model == o.model && a == o.a && b == o.b && request.kind == o.request.kind &&
         request.position == o.request.position && request.target_ids == o.request.target_ids &&
         request.incremental == o.request.incremental;
}

std::vector<int> patch_targets(const Model& m, const std::string& a, const std::string& b) {
  std::vector<int> ids;
  if (!a.empty()) ids.push_back(target_token_id(m, a));
  if (!b.empty()) {
    if (a.empty()) throw Error("give the target A first (the metric is the logit of A \xE2\x88\x92 B)", ErrorKind::Usage);
    ids.push_back(target_token_id(m, b));
  }
  return ids;
}

std::string patch_alignment_problem(int ta, int tb) {
  if (tb <= 0) return "no other prompt yet: type prompt B (the other prompt) under the text in Text & model";
  if (ta <= 0) return "prompt A has no tokens yet";
  if (ta != tb)
    return "the prompts cannot be aligned: A has " + std::to_string(ta) + " tokens, B " + std::to_string(tb) +
           ". Patching takes activations position by position, so reword one prompt to the same number of tokens.";
  return "";
}

double patch_cost_gflop(const Model& m, int T, int first_diff, int position, PatchKind kind) {
  const ModelConfig& c = m.config;
  const double per_row = 2.0 * static_cast<double>(m.parameter_count()) / 1e9;  // GFLOP of one row through every layer
  const double layers = (c.n_layer + 1) / 2.0 / std::max(1, c.n_layer);        // mean share of the layers a pass runs
  first_diff = std::clamp(first_diff, 0, T);
  double rows = 2.0 * T;  // A's and B's clean runs
  if (kind == PatchKind::Heads) {
    rows += static_cast<double>(c.n_layer) * c.n_head * layers * (T - first_diff);
  } else {
    const int last = position < 0 ? T - 1 : std::min(position, T - 1);
    for (int t = first_diff; t <= last; ++t) rows += static_cast<double>(c.n_layer) * layers * (T - t);
  }
  return per_row * rows;
}

void PatchJob::request(const PatchQuery& q, bool again) {
  uint64_t serial;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!q.model || (q == asked_ && !again)) return;
    asked_ = q;
    serial = ++asked_serial_;
    current_ = result_ && result_query_ == q;
    error_.clear();
    if (current_) return;  // the grid shown is this one's (back to the prompts it was computed for)
  }
  job_.stop();
  done_ = 0;
  total_ = 0;
  job_.start([this, q, serial](const std::atomic<bool>& cancel) {
    const auto t0 = std::chrono::steady_clock::now();
    std::shared_ptr<const PatchResult> r;
    std::string err;
    try {
      r = std::make_shared<const PatchResult>(
          activation_patching(*q.model, q.a, q.b, q.request, [this, &cancel](int done, int total) {
            done_ = done, total_ = total;
            return !cancel.load();
          }));
    } catch (const Cancelled&) {
      return;  // stopped, or a newer request follows
    } catch (const std::exception& e) {
      err = e.what();
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> lock(mu_);
    if (serial != asked_serial_) return;
    if (r) {
      result_ = std::move(r);
      result_query_ = q;
      current_ = true;
      ms_ = ms;
    }
    error_ = std::move(err);
  });
}

PatchJob::Status PatchJob::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  Status s;
  s.result = result_;
  s.result_query = result_query_;
  s.current = current_;
  s.error = error_;
  s.running = !job_.idle();
  s.stopped = !s.running && !current_ && error_.empty() && asked_.model != nullptr;
  s.done = done_;
  s.total = total_;
  s.ms = ms_;
  return s;
}

}  // namespace attnviz::ui
