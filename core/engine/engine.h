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

  int last_recomputed_from() const { return last_from_; }  // first position the last run computed
  // First layer the last run computed: > 0 when only the ablation changed and the backend
  // could start at its first affected layer (the CPU backend can).
  int last_recomputed_from_layer() const { return last_from_layer_; }
  void clear_cache();

  const Trace& trace() const { return trace_; }
  const Model& model() const { return *model_; }
  std::shared_ptr<const Model> model_ptr() const { return model_; }
  const Backend& backend() const { return *backend_; }

 private:
  std::shared_ptr<const Model> model_;
  std::unique_ptr<Backend> backend_;
  int block_size_ = 0;
  int last_from_ = 0;
  int last_from_layer_ = 0;
  int stale_from_layer_ = 1 << 30;  // first layer a changed ablation affects; large: none
  bool cache_valid_ = false;
  Trace trace_;
};

// Checks ids against the vocabulary; throws an Error naming the first bad id and position.
void check_token_ids(const std::vector<int>& ids, int vocab_size);

// Throws a data Error (with the estimate) when recording a window of T tokens of a model
// with config `c` would not fit in the memory available.
void check_trace_memory(const ModelConfig& c, int64_t T);

// Encodes with the model's tokenizer; a clear Error when the model has none.
std::vector<int> encode_text(const Model& m, const std::string& text);

}  // namespace attnviz
