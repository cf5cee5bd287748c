// Head importance computed off the UI thread: for the tokens of the current window, the
// loss change of each head ablated alone (zero and mean), on a thread of its own with its
// own CPU engine, so typing and the worker are not held up. A new request cancels the
// running one (after the forward pass in flight). No ImGui.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/engine/importance.h"
#include "core/model/model.h"

namespace attnviz::ui {

class ImportanceJob {
 public:
  ImportanceJob() = default;
  ~ImportanceJob();  // cancels and joins
  ImportanceJob(const ImportanceJob&) = delete;
  ImportanceJob& operator=(const ImportanceJob&) = delete;

  // Computes the grid for `window` (the ids the model sees) unless the same model and ids
  // are already running or done.
  void request(std::shared_ptr<const Model> model, const std::vector<int>& window);

  struct Status {
    bool running = false;
    int done = 0, total = 0;                    // forward passes
    std::shared_ptr<const ImportanceGrid> grid;  // the last complete grid (null before one)
    std::vector<int> grid_window;               // the ids it was computed for
    std::string error;
  };
  Status status() const;
  bool idle() const { return !running_.load(); }

 private:
  void stop();

  mutable std::mutex mu_;
  std::thread thread_;
  std::atomic<bool> cancel_{false}, running_{false};
  std::atomic<int> done_{0}, total_{0};
  std::weak_ptr<const Model> model_;  // what was last requested (weak: a later model at the
                                      // same address must not pass for it)
  std::vector<int> window_;
  std::shared_ptr<const ImportanceGrid> grid_;
  std::vector<int> grid_window_;
  std::string error_;
};

}  // namespace attnviz::ui
