// The engine: a model, a backend, the block_size window and the KV cache. The GUI calls
// run() on every keystroke; only what changed is recomputed.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/engine/backend.h"
#include "core/model/model.h"
#include "core/engine/trace.h"

namespace attnviz {

class Engine {
 public:
  Engine(std::shared_ptr<const Model> model, std::unique_ptr<Backend> backend);

  // 1 … model context; throws a usage Error otherwise. Defaults to the model's context.
  void set_block_size(int block_size);
  int block_size() const { return block_size_; }

  // Runs the model on `ids` (everything typed): only the last block_size ids enter, at
  // positions 0…T-1 (nanoGPT's idx[:, -block_size:]). While the window keeps its start,
  // the longest common prefix with the previous call is reused from the KV cache; when the
  // window slides every position changes and everything is recomputed. Throws an Error
  // for empty input or ids outside the vocabulary.
  const Trace& run(const std::vector<int>& ids);
  // Encodes `text` with the model's tokenizer, then run().
  const Trace& run_text(const std::string& text);

  // Heads to ablate from the next run on (see ablation.h). A change recomputes the window
  // once, from the first layer it affects when the tokens are the same and the backend
  // keeps the residual stream (else all of it); with `zero` later runs stay incremental,
  // with `mean` every run computes the whole window (the mean changes with every token).
  void set_ablation(const Ablation& a);
  const Ablation& ablation() const { return backend_->ablation(); }

  // Whether traces keep every head's (T, T) scores and probs (kKeep), or only q, k, v and
  // the summaries, a head's matrices recomputed when asked for (kRecompute: O(T) memory per
  // head, see LayerTrace). kAuto keeps them while they take at most kKeepMatricesBytes and
  // the backend can recompute (the CPU's). The env var ATTNVIZ_TRACE_MATRICES
  // (keep, recompute, auto) sets the engine's starting policy.
  enum class Matrices { kAuto, kKeep, kRecompute };
  void set_matrices(Matrices m);
  Matrices matrices() const { return matrices_; }
  bool compact_for(int64_t T) const;  // what run() will record for a window of T tokens

  // Whether traces hold every row's logits (the default; dump and eval need them) or only
  // the last row's and every row's next-token loss (the GUI, bench: a long window of a
  // large vocabulary then never holds (T, V)). Backends that cannot (the GPU's) keep all.
  void set_all_logits(bool all);
  bool all_logits() const { return all_logits_; }

  // Whether traces hold the per-head summaries (row_stats, thumbnails; the default) or not
  // (Trace::summaries): commands that read only logits or losses turn them off and save
  // their time (about 40% of eval's on a small model).
  void set_summaries(bool on);
  bool summaries() const { return summaries_; }

  // For typing into long texts (the GUI): after a run, every row tensor of a compact trace
  // has room for a quarter more tokens, so the next keys write in place and a trace is not
  // moved on the first key after a long text loads (the copy costs the run it follows).
  void set_room_to_grow(bool on) { room_to_grow_ = on; }

  int last_recomputed_from() const { return last_from_; }  // first position the last run computed
  // First layer the last run computed: > 0 when only the ablation changed and the backend
  // could start at its first affected layer (the CPU backend can).
  int last_recomputed_from_layer() const { return last_from_layer_; }
  void clear_cache();
  // Progress and cancellation for the following runs (see RunControl); run() then throws
  // Cancelled when `c->cancel` is set during a forward, keeping the KV cache of the
  // positions before the ones it was computing, so the next run starts there.
  void set_control(RunControl* c) { backend_->set_control(c); }

  const Trace& trace() const;  // the last run's

  // The last run's trace, to keep: the engine never writes a trace while a pointer from
  // share() to it is alive. The next run then works on a second trace, brought up to date
  // by copying only the rows the runs since it was current changed (copy_changed), so
  // sharing costs a row per layer after a keystroke instead of a copy of the trace. At
  // most two traces exist while one pointer is held; more only while older ones are too.
  std::shared_ptr<const Trace> share();
  size_t trace_copies() const { return 1 + older_.size(); }  // traces held: the current one and older ones
  const Model& model() const { return *model_; }
  std::shared_ptr<const Model> model_ptr() const { return model_; }
  const Backend& backend() const { return *backend_; }

 private:
  std::shared_ptr<const Model> model_;
  std::unique_ptr<Backend> backend_;
  int block_size_ = 0;
  Matrices matrices_ = Matrices::kAuto;
  bool all_logits_ = true;
  bool summaries_ = true;
  int last_from_ = 0;
  int last_from_layer_ = 0;
  int stale_from_layer_ = 1 << 30;  // first layer a changed ablation affects; large: none
  bool cache_valid_ = false;
  bool partial_ = false;  // the last forward was cancelled half-way (see set_control)
  bool room_to_grow_ = false;

 public:
  struct Slot;  // (defined in engine.cpp)

 private:
  std::shared_ptr<Slot> slot_;               // the trace runs write: never one share() gave out
  std::vector<std::shared_ptr<Slot>> older_;  // traces it replaced, reused once released
  void take_unshared_slot();  // before a run writes: moves to another slot if this one is shared
  // A released older slot (or, with `make`, a new one) brought up to date with the current
  // trace, taken out of older_; null when none is released and !make.
  std::shared_ptr<Slot> free_spare(bool make);
  void mark_changed(int from_row, int from_layer);  // what a run is about to rewrite
};

// Checks ids against the vocabulary; throws an Error naming the first bad id and position.
void check_token_ids(const std::vector<int>& ids, int vocab_size);

// (T, T) matrices a trace keeps under Engine::Matrices::kAuto: above this (all layers' scores
// and probs together) a trace is compact. Chosen by measurement: see the README's
// "Long texts and large models" section.
constexpr double kKeepMatricesBytes = 256e6;

// Throws a data Error (with the estimate) when recording a window of T tokens of a model
// with config `c` (compact: without the (T, T) matrices) would not fit in the memory available.
void check_trace_memory(const ModelConfig& c, int64_t T, bool compact = false, bool all_logits = true);

// The longest window (1 ≤ result ≤ c.n_ctx) whose trace (compact or not; the last row's
// logits, as the GUI records) is estimated at no more than `bytes`, and that estimate. The
// GUI caps its block_size slider there and says why: a model with a 128k context would
// otherwise offer windows whose trace the machine cannot hold.
struct WindowLimit {
  int64_t max_T = 1;
  double bytes_at_n_ctx = 0;  // the trace the model's whole context would need
  bool capped() const { return bytes_at_n_ctx > 0; }  // max_T < n_ctx
};
WindowLimit window_limit_for_memory(const ModelConfig& c, bool compact, double bytes);

// Traces of one window an engine that is typed into holds (set_room_to_grow and share(), as
// the GUI runs it): the one shown and the one the next run writes, each with room for a
// quarter more tokens.
constexpr double kTypingTraceCopies = 2 * 1.25;
// The longest window such an engine can hold in `bytes`: kTypingTraceCopies traces of it.
// bytes_at_n_ctx is what it would hold for the model's whole context (all the copies).
WindowLimit typing_window_limit(const ModelConfig& c, bool compact, double bytes);

// Row i's next-token logits (V values) into `out`: the row the trace holds, or else (the
// GUI keeps only the last row's) computed from the final hidden state through the
// unembedding, the product the pass itself runs. Throws when the trace has neither.
void row_logits(const Model& m, const Trace& tr, int i, std::vector<float>& out);

// Encodes with the model's tokenizer; a clear Error when the model has none.
std::vector<int> encode_text(const Model& m, const std::string& text);

}  // namespace attnviz
