#include "ui/jobs/analysis_jobs.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/engine/backend.h"
#include "core/error.h"

namespace attnviz::ui {

namespace fs = std::filesystem;

void ScoreJob::request(const ScoreQuery& q) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (q == query_ || !q.model || !q.trace) return;
    query_ = q;
    result_.reset();
    error_.clear();
  }
  job_.start([this, q](const std::atomic<bool>& cancel) {
    std::shared_ptr<const ScoreAttribution> a;
    std::string err;
    try {
      a = std::make_shared<const ScoreAttribution>(score_attribution(*q.model, *q.trace, q.layer, q.head, q.query, q.key));
    } catch (const std::exception& e) {
      err = e.what();
    }
    if (cancel.load()) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (!(q == query_)) return;
    result_ = a;
    error_ = err;
  });
}

ScoreJob::Status ScoreJob::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {result_, query_, error_, !job_.idle()};
}

void CompositionJob::request(std::shared_ptr<const Model> model) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!model || model == model_) return;
    model_ = model;
    result_.reset();
    error_.clear();
  }
  job_.start([this, model](const std::atomic<bool>& cancel) {
    std::shared_ptr<const Composition> c;
    std::string err;
    try {
      c = std::make_shared<const Composition>(head_composition(*model, &cancel));
    } catch (const Cancelled&) {
      return;
    } catch (const std::exception& e) {
      err = e.what();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (model != model_) return;
    result_ = c;
    error_ = err;
  });
}

CompositionJob::Status CompositionJob::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {result_, error_, !job_.idle()};
}

std::string ScanJob::cache_path(const Model& model, const std::string& corpus, const ScanOptions& o) const {
  if (cache_dir_.empty()) return "";  // keeps none
  std::error_code ec;
  const fs::path p = fs::absolute(corpus, ec);
  const auto size = fs::file_size(p, ec);
  if (ec) return "";
  const auto mtime = fs::last_write_time(p, ec).time_since_epoch().count();
  if (ec) return "";
  std::ostringstream key;
  key << model.name << '\n' << model.config.n_layer << ' ' << model.config.n_head << ' ' << model.config.n_embd << '\n'
      << p.string() << '\n' << size << ' ' << mtime << '\n' << o.window << ' ' << o.stride << ' ' << o.top;
  const size_t h = std::hash<std::string>()(key.str());
  char name[40];
  std::snprintf(name, sizeof name, "scan-%016zx.json", h);
  return (fs::path(cache_dir_) / "scans" / name).string();
}

void ScanJob::start(std::shared_ptr<const Model> model, const std::string& corpus, const ScanOptions& o) {
  job_.stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    result_.reset();
    error_.clear();
    corpus_ = corpus;
    from_cache_ = false;
    progress_ = {};
  }
  if (!model) return;
  const std::string cached = cache_path(*model, corpus, o);
  if (!cached.empty() && fs::exists(cached)) {  // a finished scan of the same model and corpus
    try {
      std::ifstream in(cached, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      auto r = std::make_shared<const ScanResult>(scan_result_from_json(ss.str()));
      std::lock_guard<std::mutex> lock(mu_);
      result_ = r;
      from_cache_ = true;
      return;
    } catch (const std::exception&) {
      std::error_code ec;
      fs::remove(cached, ec);  // unreadable: scan again
    }
  }
  job_.start([this, model, corpus, o, cached](const std::atomic<bool>& cancel) {
    std::shared_ptr<const ScanResult> r;
    std::string err;
    try {
      Engine engine(model, make_cpu_backend());
      engine.set_all_logits(false);
      RunControl control;
      engine.set_control(&control);
      std::thread watch;  // forwards a cancel into the running forward
      std::atomic<bool> done{false};
      watch = std::thread([&] {
        while (!done.load()) {
          if (cancel.load()) control.cancel = true;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      });
      try {
        r = std::make_shared<const ScanResult>(scan_corpus(
            engine, corpus, o,
            [this](const ScanProgress& p) {
              std::lock_guard<std::mutex> lock(mu_);
              progress_ = p;
            },
            &cancel));
      } catch (...) {
        done = true;
        watch.join();
        throw;
      }
      done = true;
      watch.join();
      if (!cached.empty()) {  // kept for the next time, written whole or not at all
        std::error_code ec;
        fs::create_directories(fs::path(cached).parent_path(), ec);
        const std::string tmp = cached + ".part";
        {
          std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
          f << scan_result_json(*r, model->config);
          if (!f) fs::remove(tmp, ec);
        }
        if (fs::exists(tmp)) fs::rename(tmp, cached, ec);
      }
    } catch (const Cancelled&) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = "cancelled: nothing was kept";
      return;
    } catch (const std::exception& e) {
      err = e.what();
    }
    std::lock_guard<std::mutex> lock(mu_);
    result_ = r;
    error_ = err;
  });
}

ScanJob::Status ScanJob::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  Status s;
  s.result = result_;
  s.corpus = corpus_;
  s.error = error_;
  s.running = !job_.idle();
  s.from_cache = from_cache_;
  s.progress = progress_;
  return s;
}

}  // namespace attnviz::ui
