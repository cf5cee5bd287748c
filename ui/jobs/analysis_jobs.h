// The jobs behind the "Why this score", Circuits and Head scan panels, each on a thread of
// its own (BackgroundJob, lens_job.h). No ImGui.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "core/engine/composition.h"
#include "core/engine/head_scan.h"
#include "core/engine/score_attribution.h"
#include "ui/jobs/lens_job.h"

namespace attnviz::ui {

// One score split (score_attribution) of the shown trace.
struct ScoreQuery {
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Trace> trace;
  int layer = 0, head = 0, query = 0, key = 0;
  bool operator==(const ScoreQuery& o) const {
    return model == o.model && trace == o.trace && layer == o.layer && head == o.head && query == o.query && key == o.key;
  }
};

class ScoreJob {
 public:
  void request(const ScoreQuery& q);  // nothing when q is the last request
  struct Status {
    std::shared_ptr<const ScoreAttribution> result;  // of `query` (null while computing or failed)
    ScoreQuery query;
    std::string error;
    bool running = false;
  };
  Status status() const;
  bool idle() const { return job_.idle(); }

 private:
  mutable std::mutex mu_;
  ScoreQuery query_;
  std::shared_ptr<const ScoreAttribution> result_;
  std::string error_;
  BackgroundJob job_;
};

// Head composition of one model, computed once per model.
class CompositionJob {
 public:
  void request(std::shared_ptr<const Model> model);
  struct Status {
    std::shared_ptr<const Composition> result;
    std::string error;
    bool running = false;
  };
  Status status() const;
  bool idle() const { return job_.idle(); }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const Model> model_;
  std::shared_ptr<const Composition> result_;
  std::string error_;
  BackgroundJob job_;
};

// A head scan over a corpus, on its own engine (CPU backend) so that typing goes on.
// Finished results are saved under `cache_dir` as JSON named by the model and the corpus
// (path, size and modification time), written through a temporary file so that a cancelled
// or failed scan leaves nothing; start() first looks there and reopens a result at once.
class ScanJob {
 public:
  explicit ScanJob(std::string cache_dir) : cache_dir_(std::move(cache_dir)) {}
  void start(std::shared_ptr<const Model> model, const std::string& corpus, const ScanOptions& o);
  void cancel() { job_.stop(); }
  struct Status {
    std::shared_ptr<const ScanResult> result;
    std::string corpus, error;
    bool running = false, from_cache = false;
    ScanProgress progress;
  };
  Status status() const;
  bool idle() const { return job_.idle(); }
  // The file a scan of `model` over `corpus` is kept in ("" when the corpus cannot be read,
  // or the job keeps none: an empty cache_dir).
  std::string cache_path(const Model& model, const std::string& corpus, const ScanOptions& o) const;

 private:
  std::string cache_dir_;
  mutable std::mutex mu_;
  std::shared_ptr<const ScanResult> result_;
  std::string corpus_, error_;
  bool from_cache_ = false;
  ScanProgress progress_;
  BackgroundJob job_;
};

}  // namespace attnviz::ui
