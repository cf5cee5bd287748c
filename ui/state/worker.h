// Inference off the UI thread. A worker thread owns the Engine (model + backend + KV
// cache). The UI posts the latest request (model, backend, text, block size) whenever
// something changes and never waits; requests that arrive while one runs replace each
// other, so only the newest is computed. The worker publishes an immutable Snapshot
// (std::shared_ptr<const Snapshot>, swapped under a mutex) that the UI reads each frame.
// No ImGui.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/engine/engine.h"
#include "core/tokenize/labels.h"

namespace attnviz::ui {

struct Request {
  std::string model_spec;       // directory or builtin:NAME
  std::string backend = "cpu";  // "cpu" or "gpu"
  bool f32_weights = false;     // --weights f32: every matrix converted on load (LoadOptions)
  std::string arith = "f32";    // products with quantized weights (set_arith before each run)
  std::string text;
  int block_size = 0;           // 0 or out of range: the model's context
  // Whether the tokenizer adds its special tokens (BOS): not for a chat template's output,
  // which writes them itself (apply_chat_template's encode).
  bool add_special = true;
  // A model already in memory (the Training panel's weights as they learn): used instead of
  // loading model_spec, which then only names it.
  std::shared_ptr<const Model> model;
  Ablation ablation;            // heads whose output is replaced (none: the plain model)
  bool operator==(const Request& o) const {
    return model_spec == o.model_spec && backend == o.backend && f32_weights == o.f32_weights && arith == o.arith &&
           text == o.text &&
           block_size == o.block_size && add_special == o.add_special &&
           model == o.model && ablation == o.ablation;
  }
  bool operator!=(const Request& o) const { return !(*this == o); }
};

struct Snapshot {
  uint64_t request_serial = 0;  // the post() this answers
  uint64_t trace_serial = 0;    // changes whenever `trace` is a new result (textures re-upload)
  Request request;              // what was asked

  std::shared_ptr<const Model> model;  // null until a model loaded
  std::shared_ptr<const Trace> trace;  // the last GOOD trace (kept when the newest request failed)
  std::string trace_text;              // the text `trace` was computed from (as typed: see `skipped`)
  // Characters of the text the tokenizer has no token for (each once, in order of first
  // appearance; e.g. English typed into poems-zh): left out of the tokens, so the rest still
  // runs. skipped_count counts every occurrence.
  std::vector<std::string> skipped;
  int skipped_count = 0;
  // None of the typed characters is in the vocabulary, so the model's sample text
  // (sample_text) runs instead of nothing: trace_text is then the sample.
  bool showing_sample = false;
  std::vector<int> all_ids;            // every token of trace_text (dropped + window)
  std::vector<TokenLabel> labels;      // one per all_ids: readable text, bytes (token_labels)

  std::string error;         // why the newest request failed; empty when it ran
  std::string backend_note;  // why the GPU backend fell back to the CPU, if it did
  std::string backend_name;  // the backend actually running
  bool random_weights = false;  // the model was written by write_random_model
  double forward_ms = 0.0;   // time of the last Engine::run
  double device_ms = -1.0;   // its GPU time (GL timer queries); −1 on the CPU
  double load_ms = 0.0;      // time to load the model (last load)
  int recomputed_from = 0;   // first position the last run computed (KV cache reuse)

  // Mean next-token loss over the window (nats) of `trace`, which is the ablated run when
  // trace->ablation is not empty; then the same without the ablation (a second engine on
  // the CPU) for comparison, and the last row of its logits.
  double loss = 0.0;
  double clean_loss = 0.0;
  std::vector<float> clean_logits;  // (V) last position without the ablation; empty when none
};

class Worker {
 public:
  Worker();
  ~Worker();  // finishes the running request, then joins
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Replaces any request not started yet. Returns its serial.
  uint64_t post(Request r);
  // The newest published snapshot (never null; empty before the first result).
  std::shared_ptr<const Snapshot> latest() const;
  // True while a posted request has not been answered.
  bool busy() const;
  // Blocks until the answer to `serial` is published or `timeout_ms` passes; true if done.
  bool wait_for(uint64_t serial, int timeout_ms) const;
  // The running forward's layers done and its layers ({0, 0} when nothing runs; the GPU's
  // backend does not count). Lock-free: read every frame.
  std::pair<int, int> progress() const;
  // Called on the worker thread after each answer is published: the GUI wakes its event
  // loop with it (glfwPostEmptyEvent), so a result is drawn at once, not at the next poll.
  void set_on_publish(std::function<void()> f);

 private:
  // The engine, its model and what the worker knew of them, kept while a newly loaded model
  // has not run yet (handle()).
  struct Shown {
    std::unique_ptr<Engine> engine, clean_engine;
    std::string model_spec, backend, note;
    bool random_weights = false;
    double load_ms = 0.0;
    EncodeCache cache;
    Snapshot snap;
  };

  void loop();
  // One request, in the steps below; publishes its answer (or nothing, when a newer request
  // came meanwhile and will answer).
  void handle(const Request& r, uint64_t serial);
  // 1. The model and backend of `r`, loaded only when they change. A model replaced here goes
  // to `shown`. False when it did not load (next.error says why).
  bool prepare_engine(const Request& r, Snapshot& next, std::optional<Shown>& shown);
  // 2. The block size, then the ids of r.text (re-tokenized from the edit; characters the
  // tokenizer lacks left out, the model's sample when none is known); `ran_text` is the text
  // they encode.
  std::vector<int> tokens_of(const Request& r, Snapshot& next, std::string& ran_text);
  // 3. The forward pass through the KV cache with r's ablation, shared into `next` (with the
  // clean run beside an ablated one). False when a newer request was posted before it began.
  bool run_forward(const Request& r, uint64_t serial, const std::vector<int>& ids, Snapshot& next);
  void put_back(Shown& shown);                     // the kept engine becomes the engine again
  void publish(Snapshot&& next, uint64_t serial);  // the answer to `serial`
  // After an encoding error with no trace to keep: runs the text up to the first character
  // the tokenizer does not know, so the first screen is not empty.
  void run_known_prefix(const std::string& text, Snapshot& next);
  // The ids of `text` with the characters the tokenizer cannot encode left out (they go to
  // next.skipped); throws when the text is not valid UTF-8.
  std::vector<int> encode_known(const Tokenizer& tok, const std::string& text, bool add_special, Snapshot& next);
  // The loss of the published trace, and with an ablation the clean run beside it.
  void compare_with_clean(const std::vector<int>& ids, Snapshot& next);

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;       // wakes the worker
  mutable std::condition_variable done_cv_;  // wakes wait_for()
  std::optional<Request> pending_;
  RunControl control_;  // the running forward's progress; post() cancels it for a newer request
  std::atomic<bool> running_{false};
  uint64_t posted_ = 0;     // serial of the newest post
  uint64_t answered_ = 0;   // serial of the newest published answer
  bool stop_ = false;
  std::shared_ptr<const Snapshot> snap_;
  std::function<void()> on_publish_;

  // Owned by the worker thread only.
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Engine> clean_engine_;  // the same model without ablation, made when one is asked for
  std::string engine_model_, engine_backend_;
  bool engine_f32_ = false;  // the loaded model's weights were converted to float32
  std::string backend_note_;
  bool random_weights_ = false;
  EncodeCache encode_cache_;  // the last text's tokens, for incremental re-tokenization
  bool cache_add_special_ = true;  // the add_special encode_cache_ was filled with
  double load_ms_ = 0.0;
  uint64_t trace_serial_ = 0;
  std::string load_error_;

  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace attnviz::ui
