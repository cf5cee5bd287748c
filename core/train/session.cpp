#include "core/train/session.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>

#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/error.h"

namespace attnviz {

const char* session_state_name(SessionState s) {
  switch (s) {
    case SessionState::Idle: return "idle";
    case SessionState::Running: return "running";
    case SessionState::Paused: return "paused";
    case SessionState::Finished: return "finished";
    case SessionState::Stopped: return "stopped";
    case SessionState::Failed: return "failed";
  }
  return "?";
}

std::shared_ptr<const Model> model_of_run(const TrainRun& r, std::shared_ptr<const Tokenizer> tok,
                                          const std::string& name) {
  auto m = std::make_shared<Model>();
  m->name = name;
  m->config = r.c;
  m->weights = weights_from_params(r.p);
  m->tokenizer = std::move(tok);
  return m;
}

std::vector<std::vector<int>> induction_probes(const Tokenizer* tok, int vocab_size, int n_ctx, int len, int count,
                                               const std::vector<int>* avoid) {
  std::vector<int> pool;
  for (int id = 0; tok && id < std::min(vocab_size, tok->vocab_size()); ++id) {
    const std::string p = tok->piece(id);
    const auto c = p.empty() ? 0 : static_cast<unsigned char>(p[0]);
    const bool printable_ascii = p.size() == 1 && c >= 0x20 && c < 0x7f;
    const size_t lead_len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    if (printable_ascii || (lead_len && p.size() == lead_len)) pool.push_back(id);
  }
  if (pool.size() < 2) {
    pool.clear();
    for (int id = 0; id < vocab_size; ++id) pool.push_back(id);
  }
  const int hi = std::max(1, std::min(30, n_ctx / 2)), lo = std::min(10, hi);
  std::vector<std::vector<int>> probes;
  for (int s = 0; s < count; ++s) {
    // Not the training batches' stream (seed · golden ratio + step): a seed of its own.
    std::mt19937_64 rng(0x1dc7105eedull * (static_cast<uint64_t>(s) + 1));
    std::uniform_int_distribution<size_t> any(0, pool.size() - 1);
    std::vector<int> str;
    for (int attempt = 0; attempt < 100; ++attempt) {
      const int n = len > 0 ? std::max(1, std::min(len, n_ctx / 2)) : std::uniform_int_distribution<int>(lo, hi)(rng);
      str.clear();
      for (int i = 0; i < n; ++i) str.push_back(pool[any(rng)]);
      if (!avoid || std::search(avoid->begin(), avoid->end(), str.begin(), str.end()) == avoid->end()) break;
    }
    std::vector<int> ids = str;
    ids.insert(ids.end(), str.begin(), str.end());
    probes.push_back(std::move(ids));
  }
  return probes;
}

std::vector<HeadScore> probe_head_scores(const Model& m, const std::vector<std::vector<int>>& probes) {
  std::vector<HeadScore> mean;
  if (probes.empty()) return mean;
  // The engine wants shared ownership; this view does not own `m`, which outlives it.
  Engine engine(std::shared_ptr<const Model>(&m, [](const Model*) {}), make_cpu_backend());
  std::vector<float> scratch;
  for (const auto& ids : probes) {
    engine.clear_cache();
    const Trace& tr = engine.run(ids);
    const auto s = score_heads(tr);
    if (mean.empty()) mean.assign(s.size(), HeadScore{});
    const int T = static_cast<int>(ids.size()), n = T / 2;
    for (size_t i = 0; i < s.size(); ++i) {
      mean[i].layer = s[i].layer;
      mean[i].head = s[i].head;
      mean[i].previous_token += s[i].previous_token / probes.size();
      mean[i].first_token += s[i].first_token / probes.size();
      mean[i].self += s[i].self / probes.size();
      // The repeat score: each query of the second copy on the token after its first copy.
      const float* P = tr.layers[static_cast<size_t>(s[i].layer)].head_values(Stage::Probs, s[i].head, scratch);
      double rep = 0;
      for (int q = n; q < 2 * n; ++q) rep += P[static_cast<int64_t>(q) * T + (q - n + 1)];
      mean[i].induction += static_cast<float>(n ? rep / n : 0.0) / probes.size();
    }
  }
  for (auto& h : mean) h.induction += 1;  // HeadScore starts induction at −1 ("none")
  return mean;
}

TrainingSession::TrainingSession() : published_(std::make_shared<SessionStatus>()) {}

TrainingSession::~TrainingSession() { join(); }

void TrainingSession::join() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TrainingSession::start(const SessionOptions& o) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (next_.state == SessionState::Running || next_.state == SessionState::Paused)
      throw Error("a training run is already going: stop or reset it first", ErrorKind::Usage);
  }
  if (o.publish_every < 1 || o.snapshot_every < 1)
    throw Error("publish and snapshot intervals must be ≥ 1", ErrorKind::Usage);
  // Everything that can fail on bad input happens here, before the old run is touched.
  auto run = std::make_unique<TrainRun>(start_run(o.train));
  auto tok = std::make_shared<const CharTokenizer>(run->corpus.vocab);
  auto probes =
      induction_probes(tok.get(), run->c.vocab_size, run->c.n_ctx, o.probe_len, o.probe_strings, &run->corpus.ids);
  const double val0 = validate_run(*run);
  auto model = model_of_run(*run, tok, "training (step " + std::to_string(run->st.step) + ")");
  auto scores = probe_head_scores(*model, probes);

  join();  // the previous run's thread, if any, has ended (stopped, finished or failed)
  std::lock_guard<std::mutex> lock(mu_);
  opts_ = o;
  run_ = std::move(run);
  tokenizer_ = tok;
  probe_ids_ = std::move(probes);
  snaps_.clear();
  next_ = SessionStatus{};
  next_.serial = published_->serial;
  next_.state = SessionState::Running;
  next_.step = next_.first_step = run_->st.step;
  next_.steps = run_->o.steps;
  next_.val_steps.push_back(next_.step);
  next_.val_loss.push_back(static_cast<float>(val0));
  pause_ = stop_ = false;
  record_locked(model, &scores, true);
  thread_ = std::thread([this] { loop(); });
}

void TrainingSession::pause() {
  std::lock_guard<std::mutex> lock(mu_);
  pause_ = true;
}

void TrainingSession::resume() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pause_ = false;
    if (next_.state == SessionState::Paused) {  // say so at once: wait_idle() must not see the old pause
      next_.state = SessionState::Running;
      record_locked(next_.model, nullptr, false);
    }
  }
  cv_.notify_all();
}

void TrainingSession::pause_at(int step) {
  std::lock_guard<std::mutex> lock(mu_);
  pause_at_ = step;
}

void TrainingSession::stop() {
  join();
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = false;
}

void TrainingSession::reset() {
  join();
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = pause_ = false;
  run_.reset();
  snaps_.clear();
  probe_ids_.clear();
  next_ = SessionStatus{};
  next_.serial = published_->serial + 1;
  published_ = std::make_shared<const SessionStatus>(next_);
  idle_cv_.notify_all();
}

std::shared_ptr<const SessionStatus> TrainingSession::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return published_;
}

bool TrainingSession::wait_idle(int timeout_ms) const {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [&] { return published_->state != SessionState::Running; });
}

std::shared_ptr<const Model> TrainingSession::snapshot(int step) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : snaps_)
    if (s.step == step) return s.model;
  return nullptr;
}

void TrainingSession::save(const std::string& dir, int step) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!run_) throw Error("nothing to save: no training run yet");
  if (next_.state == SessionState::Running)
    throw Error("the run is training: pause or stop it before saving", ErrorKind::Usage);
  const auto& vocab = run_->corpus.vocab;
  if (step < 0) {
    save_checkpoint(dir, run_->c, run_->p, vocab, &run_->st, &run_->o);
    return;
  }
  for (const auto& s : snaps_)
    if (s.step == step) {
      const Params<float> p = params_from_weights<float>(s.model->weights);
      save_checkpoint(dir, run_->c, p, vocab, nullptr, nullptr);
      return;
    }
  throw Error("step " + std::to_string(step) + " is not among the kept snapshots");
}

std::vector<std::vector<int>> TrainingSession::probes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return probe_ids_;
}

void TrainingSession::record_locked(std::shared_ptr<const Model> model, const std::vector<HeadScore>* scores,
                                    bool keep_snapshot) {
  next_.model = model;
  next_.model_step = next_.step;
  if (scores) {
    next_.scores.push_back({next_.step, *scores});
    if (next_.induction_step < 0)
      for (const auto& h : *scores)
        if (h.induction >= kInductionFormed) {
          next_.induction_step = next_.step;
          next_.induction_seconds = next_.elapsed_s;
          break;
        }
  }
  if (keep_snapshot && (snaps_.empty() || snaps_.back().step != next_.step)) {
    snaps_.push_back({next_.step, model});
    thin_snapshots();
  }
  next_.snapshot_steps.clear();
  for (const auto& s : snaps_) next_.snapshot_steps.push_back(s.step);
  next_.snapshot_bytes = snaps_.size() * snapshot_size();
  next_.serial += 1;
  published_ = std::make_shared<const SessionStatus>(next_);
}

size_t TrainingSession::snapshot_size() const {
  return snaps_.empty() ? 0 : static_cast<size_t>(snaps_.front().model->parameter_count()) * sizeof(float);
}

void TrainingSession::thin_snapshots() {
  const size_t each = snapshot_size();
  while (snaps_.size() > 2 && snaps_.size() * each > opts_.snapshot_budget) {
    // The inner snapshot whose neighbours are closest: on an even grid, the oldest.
    size_t drop = 1;
    for (size_t i = 2; i + 1 < snaps_.size(); ++i)
      if (snaps_[i + 1].step - snaps_[i - 1].step < snaps_[drop + 1].step - snaps_[drop - 1].step) drop = i;
    snaps_.erase(snaps_.begin() + static_cast<std::ptrdiff_t>(drop));
  }
  if (snaps_.size() * each > opts_.snapshot_budget) {
    snaps_.erase(snaps_.begin(), snaps_.end() - 1);  // the newest always stays
    next_.message = "the snapshot budget (" + std::to_string(opts_.snapshot_budget >> 10) +
                    " KiB) is too small for two snapshots of " + std::to_string(each >> 10) +
                    " KiB: only the newest is kept, so the timeline cannot go back";
  }
}

void TrainingSession::loop() {
  using clock = std::chrono::steady_clock;
  // This thread's parallel regions only (the setting is per thread); the user's
  // OMP_NUM_THREADS wins.
  if (!std::getenv("OMP_NUM_THREADS") && train_single_threaded(run_->c)) omp_set_num_threads(1);
  std::unique_lock<std::mutex> lock(mu_);
  const int steps = run_->o.steps, eval_every = run_->o.eval_every;
  for (;;) {
    if (stop_) {
      next_.state = SessionState::Stopped;
      record_locked(next_.model, nullptr, false);
      break;
    }
    if (pause_at_ > 0 && run_->st.step >= pause_at_) {
      pause_ = true;
      pause_at_ = 0;
    }
    if (pause_) {
      next_.state = SessionState::Paused;
      record_locked(next_.model, nullptr, false);
      idle_cv_.notify_all();
      // resume() marks the state Running; a pause() right after it must be published again.
      cv_.wait(lock, [&] { return !pause_ || stop_ || next_.state != SessionState::Paused; });
      if (!stop_) next_.state = SessionState::Running;
      continue;
    }
    if (run_->st.step >= steps) {
      next_.state = SessionState::Finished;
      record_locked(next_.model, nullptr, false);
      break;
    }
    lock.unlock();
    // Only this thread touches run_ while the state is Running.
    const auto t0 = clock::now();
    TrainProgress pr;
    std::string error;
    try {
      train_step(*run_, pr);
    } catch (const std::exception& e) {
      error = e.what();
    }
    const int step = run_->st.step;
    const bool failed = !error.empty();
    const bool evaluate = !failed && (step % eval_every == 0 || step == steps);
    const bool keep = !failed && (step % opts_.snapshot_every == 0 || step == steps);
    const bool measure = !failed && (keep || step % opts_.publish_every == 0);
    const double val = evaluate ? validate_run(*run_) : 0;
    std::shared_ptr<const Model> model;
    std::vector<HeadScore> scores;
    if (measure) {
      model = model_of_run(*run_, tokenizer_, "training (step " + std::to_string(step) + ")");
      scores = probe_head_scores(*model, probe_ids_);
    }
    const double dt = std::chrono::duration<double>(clock::now() - t0).count();
    lock.lock();
    next_.elapsed_s += dt;
    if (failed) {
      // The weights of `step` gave the bad loss; those of a kept step before it gave a
      // finite one at the next step: the newest of those stays.
      next_.state = SessionState::Failed;
      while (snaps_.size() > 1 && snaps_.back().step >= step) snaps_.pop_back();
      model = snaps_.empty() ? next_.model : snaps_.back().model;
      const int good = snaps_.empty() ? step : snaps_.back().step;
      next_.message = error + "\nTraining stopped at step " + std::to_string(step) + "; the last good snapshot (step " +
                      std::to_string(good) + ") stays.";
      record_locked(model, nullptr, false);
      next_.model_step = good;
      next_.serial += 1;
      published_ = std::make_shared<const SessionStatus>(next_);
      break;
    }
    next_.step = step;
    next_.train_loss.push_back(static_cast<float>(pr.loss));
    if (evaluate) {
      next_.val_steps.push_back(step);
      next_.val_loss.push_back(static_cast<float>(val));
    }
    if (measure) record_locked(model, &scores, keep);
  }
  idle_cv_.notify_all();
}

}  // namespace attnviz
