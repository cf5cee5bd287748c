#include "ui/jobs/model_loader.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/error.h"
#include "ui/jobs/wake.h"

namespace attnviz::ui {

namespace {
// Thrown from LoadOptions::progress to stop a cancelled load; caught on the loader's thread.
struct Cancelled {};
}  // namespace

ModelLoader::~ModelLoader() {
  std::vector<std::pair<std::shared_ptr<Job>, std::thread>> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& t : threads_) t.first->cancel = true;
    threads.swap(threads_);
  }
  for (auto& t : threads) t.second.join();
}

void ModelLoader::start(const std::string& spec, WeightsMode weights) {
  auto job = std::make_shared<Job>();
  job->spec = spec;
  job->t0 = std::chrono::steady_clock::now();
  job->result.spec = spec;
  std::thread thread([job, weights] {
    LoadOptions opt;
    opt.weights = weights;
    opt.progress = [&job = *job](uint64_t done, uint64_t total) {
      job.done = done;
      job.total = total;
      job.wake.maybe_wake(250);  // the progress bar moves; the loop sleeps otherwise
      if (job.cancel) throw Cancelled{};
    };
    try {
      job->result.model = load_model(job->spec, opt);
      // ATTNVIZ_LOAD_DELAY_MS: a slow end of the load for the tests, after the last progress
      // report (nothing else wakes the event loop until the load's end does).
      if (const char* d = std::getenv("ATTNVIZ_LOAD_DELAY_MS"); d && *d)
        std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(d)));
    } catch (const Cancelled&) {
    } catch (const std::exception& e) {
      job->result.error = e.what();
    }
    if (job->cancel) job->result.model.reset();  // a model that finished anyway is dropped here, off the UI thread
    job->result.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - job->t0).count();
    job->finished = true;
    wake_ui();  // the frame that takes the model comes now, with no input
  });
  std::lock_guard<std::mutex> lock(mu_);
  if (job_) job_->cancel = true;
  job_ = job;
  threads_.emplace_back(std::move(job), std::move(thread));
  join_finished();
}

void ModelLoader::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (job_) job_->cancel = true;
  job_.reset();
  join_finished();
}

ModelLoader::Progress ModelLoader::progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  Progress p;
  if (!job_ || job_->finished) return p;
  p.running = true;
  p.spec = job_->spec;
  p.done = job_->done;
  p.total = job_->total;
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - job_->t0).count();
  return p;
}

std::optional<ModelLoader::Result> ModelLoader::take() {
  std::lock_guard<std::mutex> lock(mu_);
  join_finished();
  if (!job_ || !job_->finished) return std::nullopt;
  Result r = std::move(job_->result);
  job_.reset();
  return r;
}

void ModelLoader::join_finished() {
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (it->first->finished) {
      it->second.join();
      it = threads_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace attnviz::ui
