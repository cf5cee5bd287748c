// A training run on its own thread that a program can start, pause, resume, stop and
// reset while it watches: the desktop application's Training panel drives one. The steps
// are train_step's (core/train/train.h), so a session with the same options computes the
// same losses and weights as `attnviz-cli train`, step for step.
//
// Every `publish_every` steps the session publishes a SessionStatus: the losses so far,
// each head's previous-token and induction scores (measured on random strings typed
// twice that are not in the corpus: induction_probes), and the current weights as a Model the engine runs. Every `snapshot_every`
// steps it keeps a copy of the weights; when the copies exceed the memory budget the
// oldest are thinned first (the one whose neighbours are closest goes; the first and the
// newest always stay). A loss that is not finite stops the run with a message; the
// weights stay those of the last good step.
//
// Dimension letters as in core/model/config.h: L layers, H query heads.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/engine/head_scores.h"
#include "core/model/model.h"
#include "core/train/train.h"

namespace attnviz {

struct SessionOptions {
  TrainOptions train;                   // train.out is not used (save() names the directory)
  int publish_every = 25;               // steps between published models and head scores
  int snapshot_every = 100;             // steps between kept weight snapshots
  size_t snapshot_budget = 256u << 20;  // bytes for all snapshots together
  int probe_len = 0;                    // length of the repeated random strings; 0 = 10 … 30 (≤ block_size/2)
  int probe_strings = 8;                // induction and previous-token scores average over this many
};

// An induction head has formed when some head's induction score reaches this.
constexpr float kInductionFormed = 0.4f;

enum class SessionState { Idle, Running, Paused, Finished, Stopped, Failed };
const char* session_state_name(SessionState s);  // "idle", "running", ...

// The scores of every head at one step: (L·H) layer-major, as score_heads.
struct ScorePoint {
  int step = 0;
  std::vector<HeadScore> heads;
};

struct SessionStatus {
  SessionState state = SessionState::Idle;
  int step = 0, steps = 0;             // steps done, total
  int first_step = 0;                  // where the run began (> 0 when it resumed a checkpoint)
  std::vector<float> train_loss;       // (step − first_step) loss of step first_step+i+1 at index i
  std::vector<int> val_steps;          // steps at which validation ran (0 = before training)
  std::vector<float> val_loss;         // (val_steps.size())
  std::vector<ScorePoint> scores;      // one per publish, in step order
  int induction_step = -1;             // first scored step with an induction score ≥ kInductionFormed
  double induction_seconds = -1;       // training wall time at that step
  double elapsed_s = 0;                // training wall time (paused time not counted)
  std::shared_ptr<const Model> model;  // the weights at model_step; null before start
  int model_step = 0;
  std::vector<int> snapshot_steps;  // the steps kept, oldest first
  size_t snapshot_bytes = 0;        // bytes they hold together
  std::string message;              // why it failed, or a note (the budget); "" when none
  uint64_t serial = 0;              // grows with every publish
};

class TrainingSession {
 public:
  TrainingSession();
  ~TrainingSession();  // stops and joins
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  // Reads the corpus and makes the model on the calling thread (so bad input is an Error
  // thrown here, and the session stays as it was), then trains on a new thread. Throws a
  // usage Error while a run is running or paused.
  void start(const SessionOptions& o);
  // Take effect after the current step.
  void pause();
  void resume();
  // Pauses when `step` steps are done (tests use it for an exact point); 0 = never. It may
  // be set before start().
  void pause_at(int step);
  void stop();   // ends the run; its weights, snapshots and plots stay (state Stopped)
  void reset();  // stops and forgets everything (state Idle)

  // The newest published status (never null).
  std::shared_ptr<const SessionStatus> status() const;
  // Blocks until the run is not Running (paused, finished, stopped or failed), or the
  // timeout passes; true if it is not Running.
  bool wait_idle(int timeout_ms) const;

  // The weights kept at `step` (one of status()->snapshot_steps) as a Model; null if that
  // step is not kept.
  std::shared_ptr<const Model> snapshot(int step) const;
  // The current weights, while paused or after the run: a checkpoint directory that
  // load_model opens and `attnviz-cli train --resume` continues. With `step` ≥ 0, that
  // snapshot's weights only (no optimizer state). Throws an Error while running or when
  // there is nothing to save.
  void save(const std::string& dir, int step = -1) const;
  // The strings the induction scores are measured on (induction_probes, none of them in
  // the corpus): each a string typed twice, as token ids. Empty before start().
  std::vector<std::vector<int>> probes() const;

 private:
  struct Snap {
    int step;
    std::shared_ptr<const Model> model;
  };
  void loop();
  void join();
  // With mu_ held: records `model` as the current weights at next_.step (with its head
  // scores when given, as a snapshot when asked) and publishes next_.
  void record_locked(std::shared_ptr<const Model> model, const std::vector<HeadScore>* scores, bool keep_snapshot);
  size_t snapshot_size() const;  // bytes of one snapshot
  void thin_snapshots();

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;       // wakes the training thread
  mutable std::condition_variable idle_cv_;  // wakes wait_idle()
  SessionOptions opts_;
  std::unique_ptr<TrainRun> run_;  // null before start
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::vector<std::vector<int>> probe_ids_;  // the repeated random strings
  SessionStatus next_;                       // what the thread builds; copied on publish
  std::shared_ptr<const SessionStatus> published_;
  std::vector<Snap> snaps_;
  bool pause_ = false, stop_ = false;
  int pause_at_ = 0;
  std::thread thread_;
};

// The weights of a run as a Model the engine runs (name as given, no directory).
std::shared_ptr<const Model> model_of_run(const TrainRun& r, std::shared_ptr<const Tokenizer> tok,
                                          const std::string& name);

// `count` random strings, each typed twice: what probe_head_scores measures on. Each
// string is `len` tokens long (0 = a length drawn from 10 … 30), at most n_ctx/2, drawn
// with replacement from the ids that are one printable character (space … '~', or one
// non-ASCII code point; every id when fewer than two are). Seeded apart from any training
// batch (the same strings for the same arguments), and, with `avoid` (the corpus as ids),
// redrawn while a string occurs in it: the model never saw them.
std::vector<std::vector<int>> induction_probes(const Tokenizer* tok, int vocab_size, int n_ctx, int len, int count,
                                               const std::vector<int>* avoid = nullptr);

// Scores of every head averaged over `probes` (token id sequences, each a string typed
// twice) run through the model on the CPU. previous_token, first_token and self as
// score_heads; induction is the repeat score: with n the length of the string, the mean
// over the queries i of the repeat (n … 2n−1) of the weight on i − n + 1, the token after
// the query's earlier copy.
std::vector<HeadScore> probe_head_scores(const Model& m, const std::vector<std::vector<int>>& probes);

}  // namespace attnviz
