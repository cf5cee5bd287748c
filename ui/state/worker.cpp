#include "ui/state/worker.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

#include "core/engine/backend.h"
#include "core/engine/importance.h"
#include "core/engine/int8_product.h"
#include "core/error.h"
#include "core/model/paths.h"
#include "core/model/safetensors.h"
#include "core/tokenize/tokenizer.h"
#include "ui/state/app_state.h"

namespace attnviz::ui {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// True when model.safetensors says it was written by write_random_model.
bool has_random_weights(const Model& m) {
  if (m.dir.empty()) return false;  // made in memory, not read from a directory
  try {
    const auto f = SafetensorsSet::open_dir(m.dir);
    const auto it = f.metadata().find("generator");
    return it != f.metadata().end() && it->second.rfind("attnviz random", 0) == 0;
  } catch (const std::exception&) {
    return false;
  }
}
}  // namespace

Worker::Worker() : snap_(std::make_shared<Snapshot>()), thread_([this] { loop(); }) {}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t Worker::post(Request r) {
  uint64_t serial;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = std::move(r);
    serial = ++posted_;
    control_.cancel = true;  // a forward in flight stops after its current layer
  }
  cv_.notify_all();
  return serial;
}

std::pair<int, int> Worker::progress() const {
  if (!running_) return {0, 0};
  const int total = control_.layers_total;
  return {std::min<int>(control_.layers_done, total), total};
}

std::shared_ptr<const Snapshot> Worker::latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snap_;
}

bool Worker::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return answered_ < posted_;
}

bool Worker::wait_for(uint64_t serial, int timeout_ms) const {
  std::unique_lock<std::mutex> lock(mu_);
  return done_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return answered_ >= serial; });
}

void Worker::loop() {
  for (;;) {
    Request r;
    uint64_t serial;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || pending_.has_value(); });
      if (stop_) break;
      r = std::move(*pending_);
      pending_.reset();
      serial = posted_;
    }
    handle(r, serial);
  }
  // The engines end on this thread, where they ran: a GPU backend releases its objects in
  // its own EGL context, which cannot be made current on the GUI's thread while GLFW's GLX
  // context is current there (libglvnd: EGL_BAD_ACCESS, and the objects were left to the
  // driver with a message at every exit).
  engine_.reset();
  clean_engine_.reset();
}

void Worker::set_on_publish(std::function<void()> f) {
  std::lock_guard<std::mutex> lock(mu_);
  on_publish_ = std::move(f);
}

void Worker::publish(Snapshot&& next, uint64_t serial) {
  auto s = std::make_shared<const Snapshot>(std::move(next));
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    snap_ = std::move(s);
    if (serial > answered_) answered_ = serial;
    wake = on_publish_;
  }
  done_cv_.notify_all();
  if (wake) wake();
}

void Worker::put_back(Shown& shown) {
  engine_ = std::move(shown.engine);
  clean_engine_ = std::move(shown.clean_engine);
  engine_model_ = shown.model_spec;
  engine_backend_ = shown.backend;
  backend_note_ = shown.note;
  random_weights_ = shown.random_weights;
  load_ms_ = shown.load_ms;
  encode_cache_ = std::move(shown.cache);
}

// The request in three steps: the engine (model and backend), the tokens, the forward pass.
// A model that loads but runs nothing of the request (it has no tokenizer, or its tokenizer
// fails on this text) does not replace the model shown: that one, its engine and its
// snapshot are kept in `shown` until the new model's first trace, and put back otherwise.
void Worker::handle(const Request& r, uint64_t serial) {
  Snapshot next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    next = *snap_;
  }
  next.request_serial = serial;
  next.request = r;
  next.error.clear();

  std::optional<Shown> shown;
  if (!prepare_engine(r, next, shown)) {
    publish(std::move(next), serial);
    return;
  }
  next.backend_note = backend_note_;
  next.backend_name = engine_->backend().name();
  next.random_weights = random_weights_;
  next.load_ms = load_ms_;
  try {
    std::string ran_text;
    const std::vector<int> ids = tokens_of(r, next, ran_text);
    if (ids.empty()) {
      next.error = next.skipped.empty() ? "type some text: the model needs at least one token"
                                        : "none of the characters typed is in this model's vocabulary: type text in "
                                          "its language, or press \"sample\" for the model's own example";
      publish(std::move(next), serial);
      return;
    }
    if (!run_forward(r, serial, ids, next)) {  // a newer request came while this one was prepared: it answers
      if (shown) put_back(*shown);
      return;
    }
    next.trace_text = ran_text;
    next.all_ids = ids;
    next.labels = label_tokens(engine_->model(), ids);
  } catch (const Cancelled&) {
    if (shown && !next.trace) put_back(*shown);
    return;  // a newer request is pending; it will publish (nothing of this one is shown)
  } catch (const std::exception& e) {
    next.error = e.what();  // e.g. a character the tokenizer does not know; the last good trace stays
    if (!next.trace) run_known_prefix(r.text, next);  // nothing to keep yet: show the text before it
  }
  if (shown && !next.trace) {  // the new model ran nothing: the one shown stays, with the error
    put_back(*shown);
    const std::string why = next.error;
    next = std::move(shown->snap);
    next.request_serial = serial;
    next.request = r;
    next.error = "could not use model '" + r.model_spec + "':\n" + why;
  }
  publish(std::move(next), serial);
}

bool Worker::prepare_engine(const Request& r, Snapshot& next, std::optional<Shown>& shown) {
  // Reload only when the model or the backend changes (or the last load failed).
  if (engine_ && r.model_spec == engine_model_ && r.backend == engine_backend_ && r.f32_weights == engine_f32_ &&
      (!r.model || r.model == engine_->model_ptr()))
    return true;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    LoadOptions opt;
    if (r.f32_weights) opt.weights = WeightsMode::F32;
    const bool same_spec = engine_ && r.model_spec == engine_model_ && r.f32_weights == engine_f32_;
    std::shared_ptr<const Model> model = r.model    ? r.model
                                         : same_spec ? engine_->model_ptr()
                                                     : load_model(r.model_spec, opt);
    std::string note;
    std::unique_ptr<Backend> backend = make_backend(r.backend, &note);
    const bool same_model = engine_ && model == engine_->model_ptr();
    if (!same_model && engine_ && next.trace)
      shown = Shown{std::move(engine_), std::move(clean_engine_), engine_model_, engine_backend_, backend_note_,
                    random_weights_, load_ms_, std::move(encode_cache_), next};
    engine_ = std::make_unique<Engine>(model, std::move(backend));
    engine_->set_all_logits(false);  // the panels show the last row; the loss comes from row_loss
    engine_->set_room_to_grow(true);   // typed into: the next keys write in place
    clean_engine_.reset();
    engine_model_ = r.model_spec;
    engine_backend_ = r.backend;
    engine_f32_ = r.f32_weights;
    backend_note_ = note;
    if (!same_model) {
      random_weights_ = has_random_weights(*model);
      load_ms_ = ms_since(t0);
      next.trace.reset();  // the old trace belongs to another model
      next.trace_text.clear();
      next.all_ids.clear();
      next.labels.clear();
      encode_cache_ = EncodeCache();
    }
    next.model = model;
    return true;
  } catch (const std::exception& e) {
    next.error = std::string("could not load model '") + r.model_spec + "':\n" + e.what();
    return false;
  }
}

std::vector<int> Worker::tokens_of(const Request& r, Snapshot& next, std::string& ran_text) {
  const int n_ctx = engine_->model().config.n_ctx;
  const int bs = r.block_size >= 1 && r.block_size <= n_ctx ? r.block_size : n_ctx;
  if (bs != engine_->block_size()) engine_->set_block_size(bs);
  // Re-tokenizes only from the pre-token the edit touched (where the tokenizer allows it).
  const Model& model = engine_->model();
  next.skipped.clear();
  next.skipped_count = 0;
  next.showing_sample = false;
  std::vector<int> ids;
  try {
    if (r.add_special != cache_add_special_) encode_cache_ = EncodeCache(), cache_add_special_ = r.add_special;
    ids = model.tokenizer ? model.tokenizer->encode_incremental(r.text, r.add_special, encode_cache_) : encode_text(model, r.text);
  } catch (const Error&) {
    if (!model.tokenizer) throw;
    ids = encode_known(*model.tokenizer, r.text, r.add_special, next);  // characters it has no token for are left out
  }
  ran_text = r.text;
  if (ids.empty() && !next.skipped.empty() && model.tokenizer) {
    // Nothing typed is in the vocabulary (English typed into poems-zh): show the model's
    // own sample instead of blank panels.
    if (std::string sample = sample_text(model.dir); !sample.empty()) {
      ids = model.tokenizer->encode(sample);
      ran_text = sample;
      next.showing_sample = true;
    }
  }
  return ids;
}

bool Worker::run_forward(const Request& r, uint64_t serial, const std::vector<int>& ids, Snapshot& next) {
  Ablation ablation = r.ablation;  // heads the model has (the request may predate a model change)
  const ModelConfig& c = engine_->model().config;
  ablation.heads.erase(std::remove_if(ablation.heads.begin(), ablation.heads.end(),
                                      [&c](const auto& lh) { return lh.first >= c.n_layer || lh.second >= c.n_head; }),
                       ablation.heads.end());
  engine_->set_ablation(ablation);
  // The process's arithmetic: this thread runs every product of the GUI's models (the engine
  // recomputes its window when it changed).
  set_arith(r.arith == "int8" ? Arith::Int8 : Arith::F32);
  const auto t0 = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (serial != posted_) return false;
    control_.reset(engine_->model().config.n_layer);
  }
  engine_->set_control(&control_);
  running_ = true;
  struct Done {  // running_ off however run() ends
    std::atomic<bool>& r;
    ~Done() { r = false; }
  } done{running_};
  const Trace& t = engine_->run(ids);  // the trace it shares next: see Engine::share
  const double ms = ms_since(t0);
  const bool unchanged = next.trace && next.trace->tokens == t.tokens && next.trace->dropped == t.dropped &&
                         next.trace->block_size == t.block_size && next.trace->backend == t.backend &&
                         next.trace->ablation == t.ablation;
  if (!unchanged) {
    next.trace = engine_->share();  // no copy: the next run writes another trace
    next.trace_serial = ++trace_serial_;
    next.forward_ms = ms;
    next.device_ms = engine_->backend().last_device_ms();
    next.recomputed_from = engine_->last_recomputed_from();
    compare_with_clean(ids, next);
  }
  return true;
}

void Worker::compare_with_clean(const std::vector<int>& ids, Snapshot& next) {
  const Trace& t = *next.trace;
  next.loss = mean_next_token_loss(t);
  next.clean_logits.clear();
  next.clean_loss = next.loss;
  if (t.ablation.empty()) return;
  if (!clean_engine_ || clean_engine_->model_ptr() != engine_->model_ptr()) {
    clean_engine_ = std::make_unique<Engine>(engine_->model_ptr(), make_cpu_backend());
    clean_engine_->set_all_logits(false);
  }
  if (clean_engine_->block_size() != engine_->block_size()) clean_engine_->set_block_size(engine_->block_size());
  const Trace& c = clean_engine_->run(ids);
  next.clean_loss = mean_next_token_loss(c);
  const int V = static_cast<int>(c.logits.dim(1));
  const float* last = c.logits_row(c.T() - 1);
  next.clean_logits.assign(last, last + V);
}

std::vector<int> Worker::encode_known(const Tokenizer& tok, const std::string& text, bool add_special, Snapshot& next) {
  std::string known;
  for (const std::string& ch : utf8_split(text)) {
    try {
      tok.encode_with(ch, false);
      known += ch;
    } catch (const Error&) {
      ++next.skipped_count;
      if (std::find(next.skipped.begin(), next.skipped.end(), ch) == next.skipped.end()) next.skipped.push_back(ch);
    }
  }
  encode_cache_ = EncodeCache();  // the cache holds the last text that encoded whole
  return tok.encode_with(known, add_special);
}

void Worker::run_known_prefix(const std::string& text, Snapshot& next) {
  try {
    const Model& m = engine_->model();
    if (!m.tokenizer) return;
    std::string prefix;
    for (const std::string& ch : utf8_split(text)) {
      try {
        m.tokenizer->encode(ch);
      } catch (const std::exception&) {
        break;
      }
      prefix += ch;
    }
    const std::vector<int> ids = m.tokenizer->encode(prefix);
    if (ids.empty()) return;
    const auto t0 = std::chrono::steady_clock::now();
    engine_->run(ids);
    next.trace = engine_->share();
    next.forward_ms = ms_since(t0);
    next.device_ms = engine_->backend().last_device_ms();
    next.trace_serial = ++trace_serial_;
    next.recomputed_from = engine_->last_recomputed_from();
    compare_with_clean(ids, next);
    next.trace_text = prefix;
    next.all_ids = ids;
    next.labels = label_tokens(engine_->model(), ids);
  } catch (const std::exception&) {
    // keep the first error; there is simply no trace
  }
}

}  // namespace attnviz::ui
