#include "ui/jobs/lens_job.h"

#include <algorithm>

#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/error.h"
#include "ui/jobs/wake.h"

namespace attnviz::ui {

void BackgroundJob::stop() {
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
  cancel_ = false;
}

void BackgroundJob::start(std::function<void(const std::atomic<bool>& cancel)> fn) {
  stop();
  running_ = true;
  thread_ = std::thread([this, fn = std::move(fn)] {
    fn(cancel_);
    running_ = false;
    wake_ui();  // the frame that shows what it computed
  });
}

bool lens_row_carries(const Trace& a, const Trace& b, int i) {
  if (a.dropped != b.dropped || !(a.ablation == b.ablation) || i < 0 || i >= a.T() || i >= b.T()) return false;
  if (!std::equal(a.tokens.begin(), a.tokens.begin() + i + 1, b.tokens.begin())) return false;
  const bool a_next = i + 1 < a.T(), b_next = i + 1 < b.T();
  return a_next == b_next && (!a_next || a.tokens[static_cast<size_t>(i + 1)] == b.tokens[static_cast<size_t>(i + 1)]);
}

void LensJob::request(std::shared_ptr<const Model> model, std::shared_ptr<const Trace> trace,
                      const std::vector<int>& positions) {
  if (!model || !trace) return;
  std::vector<int> missing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (model != model_ || trace != trace_) {
      // A new trace: keep the rows that still hold, forget the rest.
      std::map<int, std::shared_ptr<const LensRow>> kept;
      if (model == model_ && trace_)
        for (auto& [i, r] : rows_)
          if (lens_row_carries(*trace_, *trace, i)) kept.emplace(i, r);
      rows_ = std::move(kept);
      model_ = model;
      trace_ = trace;
      computing_.clear();
      error_.clear();
    }
    for (int i : positions)
      if (i >= 0 && i < trace->T() && !rows_.count(i)) missing.push_back(i);
    // Nothing to do, or every row is being computed (let the job finish) or failed (no retry
    // every frame).
    const bool given = std::all_of(missing.begin(), missing.end(), [&](int i) {
      return std::find(computing_.begin(), computing_.end(), i) != computing_.end();
    });
    if (missing.empty() || (given && (!job_.idle() || !error_.empty()))) return;
    computing_ = missing;
    error_.clear();
    pending_ = static_cast<int>(missing.size());
  }
  job_.start([this, model, trace, missing](const std::atomic<bool>& cancel) {
    constexpr size_t kChunk = 4;  // positions taken through every layer before they are shown
    const int L = static_cast<int>(trace->layers.size());
    try {
      for (size_t b = 0; b < missing.size(); b += kChunk) {
        const std::vector<int> chunk(missing.begin() + static_cast<std::ptrdiff_t>(b),
                                     missing.begin() + static_cast<std::ptrdiff_t>(std::min(missing.size(), b + kChunk)));
        std::vector<LensRow> rows(chunk.size());
        for (int l = 0; l < L; ++l) {
          std::vector<LensCell> cells = logit_lens(*model, *trace, l, chunk, kLensTop, &cancel);
          for (size_t k = 0; k < chunk.size(); ++k) rows[k].cells.push_back(std::move(cells[k]));
        }
        std::lock_guard<std::mutex> lock(mu_);
        if (trace != trace_) return;
        for (size_t k = 0; k < chunk.size(); ++k) rows_[chunk[k]] = std::make_shared<const LensRow>(std::move(rows[k]));
        pending_ -= static_cast<int>(chunk.size());
      }
    } catch (const Cancelled&) {
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu_);
      if (trace == trace_) error_ = e.what();
    }
  });
}

std::shared_ptr<const LensRow> LensJob::row(int i) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rows_.find(i);
  return it == rows_.end() ? nullptr : it->second;
}

std::string LensJob::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

int target_token_id(const Model& m, const std::string& text) {
  if (text.empty()) throw Error("type a token", ErrorKind::Usage);
  if (!m.tokenizer) encode_text(m, text);  // throws, saying why there is no tokenizer
  const std::vector<int> ids = m.tokenizer->encode_with(text, false);
  if (ids.size() != 1)
    throw Error("'" + text + "' is " + std::to_string(ids.size()) + " tokens for this model's tokenizer, not one",
                ErrorKind::Usage);
  return ids[0];
}

void AttributionJob::request(const AttributionQuery& q) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (q == query_ || !q.model || !q.trace) return;
    query_ = q;
    result_.reset();
    keys_.reset();
    error_.clear();
  }
  job_.start([this, q](const std::atomic<bool>& cancel) {
    std::shared_ptr<const Attribution> a;
    std::shared_ptr<const KeyAttribution> keys;
    std::string err;
    try {
      const int T = q.trace->T();
      const int position = q.position < 0 ? T - 1 : q.position;
      if (position >= T)
        throw Error("position " + std::to_string(position) + " is outside the text (" + std::to_string(T) +
                        " tokens: 0 … " + std::to_string(T - 1) + ")",
                    ErrorKind::Usage);
      std::vector<int> targets = q.target_ids;
      if (targets.empty()) targets.push_back(predicted_token(*q.model, *q.trace, position));
      if (cancel.load()) return;
      a = std::make_shared<const Attribution>(direct_logit_attribution(*q.model, *q.trace, position, targets));
      if (q.keys) keys = std::make_shared<const KeyAttribution>(key_attribution(*q.model, *q.trace, position, targets, &cancel));
    } catch (const Cancelled&) {
      return;  // a newer request replaced it
    } catch (const std::exception& e) {
      err = e.what();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!(q == query_)) return;
    result_ = std::move(a);
    keys_ = std::move(keys);
    error_ = std::move(err);
  });
}

AttributionJob::Status AttributionJob::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  Status s;
  s.result = result_;
  s.keys = keys_;
  s.query = query_;
  s.error = error_;
  s.running = !job_.idle();
  return s;
}

}  // namespace attnviz::ui
