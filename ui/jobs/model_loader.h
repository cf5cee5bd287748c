// Loading a model off the UI thread (File → Open model…, a dropped file, a recent model):
// load_model runs on a thread of its own while the model in use stays on screen and keeps
// answering what is typed; the App hands the loaded model to the worker when it is ready.
// One load at a time: start() while one runs cancels it. Cancelling stops the load before
// its next tensor (LoadOptions::progress throws) and gives no result. No ImGui.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ui/jobs/wake.h"
#include "core/model/model.h"

namespace attnviz::ui {

class ModelLoader {
 public:
  ModelLoader() = default;
  ~ModelLoader();  // cancels the running load and joins every thread
  ModelLoader(const ModelLoader&) = delete;
  ModelLoader& operator=(const ModelLoader&) = delete;

  // Loads `spec` (a directory, FILE.gguf, builtin:NAME, ollama:NAME, hf:ORG/NAME) with
  // `weights`; a load already running is cancelled first (its result never comes).
  void start(const std::string& spec, WeightsMode weights = WeightsMode::Stored);
  // Stops the running load at its next tensor; take() gives nothing for it.
  void cancel();

  struct Progress {
    bool running = false;
    std::string spec;             // what is loading ("" when nothing is)
    uint64_t done = 0, total = 0;  // bytes of the tensors read so far, of all (0: not known yet)
    double seconds = 0.0;          // since start()
  };
  Progress progress() const;
  bool busy() const { return progress().running; }

  struct Result {
    std::string spec;
    std::shared_ptr<const Model> model;  // null when the load failed
    std::string error;                   // why it failed ("" when it loaded)
    double ms = 0.0;                     // how long it took
  };
  // The finished load's result, once (nothing while it runs, after a cancel, or when
  // already taken).
  std::optional<Result> take();

 private:
  // One start(): what its thread reports. Shared with the thread, which may outlive a
  // cancel (it stops at the next tensor).
  struct Job {
    std::string spec;
    std::chrono::steady_clock::time_point t0;
    std::atomic<bool> cancel{false}, finished{false};
    std::atomic<uint64_t> done{0}, total{0};
    WakeThrottle wake;  // the progress's wake-ups of the event loop
    Result result;  // written by the thread before `finished`
  };
  void join_finished();  // joins the threads of cancelled jobs that have ended

  mutable std::mutex mu_;
  std::shared_ptr<Job> job_;  // the current load (null: none, or its result was taken)
  std::vector<std::pair<std::shared_ptr<Job>, std::thread>> threads_;  // every thread not joined yet
};

}  // namespace attnviz::ui
