#include "ui/jobs/importance_job.h"

#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "ui/jobs/wake.h"

namespace attnviz::ui {

ImportanceJob::~ImportanceJob() { stop(); }

void ImportanceJob::stop() {
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
  cancel_ = false;
}

void ImportanceJob::request(std::shared_ptr<const Model> model, const std::vector<int>& window) {
  if (!model || window.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const bool same_model = !model_.expired() && !model_.owner_before(model) && !model.owner_before(model_);
    if (same_model && window == window_) return;
  }
  stop();
  std::lock_guard<std::mutex> lock(mu_);
  model_ = model;
  window_ = window;
  error_.clear();
  done_ = 0;
  total_ = 1 + 2 * model->config.n_layer * model->config.n_head;
  running_ = true;
  thread_ = std::thread([this, model, window] {
    try {
      Engine engine(model, make_cpu_backend());
      auto grid = std::make_shared<ImportanceGrid>(head_importance(engine, window, [this](int done, int total) {
        done_ = done, total_ = total;
        return !cancel_.load();
      }));
      if (grid->complete) {
        std::lock_guard<std::mutex> lock(mu_);
        grid_ = std::move(grid);
        grid_window_ = window;
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = e.what();
    }
    running_ = false;
    wake_ui();
  });
}

ImportanceJob::Status ImportanceJob::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  Status s;
  s.running = running_;
  s.done = done_;
  s.total = total_;
  s.grid = grid_;
  s.grid_window = grid_window_;
  s.error = error_;
  return s;
}

}  // namespace attnviz::ui
