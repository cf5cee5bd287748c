#include "core/engine/engine.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "core/engine/ops.h"
#include "core/engine/int8_product.h"
#include "core/engine/stored_product.h"
#include "core/error.h"
#include "core/limits.h"

namespace attnviz {

void check_token_ids(const std::vector<int>& ids, int vocab_size) {
  if (ids.empty())
    throw Error("no tokens to run\n  HINT: type some text (--text) or pass ids (--tokens 1,2,3).");
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw Error("token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                  " is outside the vocabulary (ids 0 … " + std::to_string(vocab_size - 1) + ")");
}

std::vector<int> encode_text(const Model& m, const std::string& text) {
  if (!m.tokenizer && m.format == "gguf")
    throw Error("model '" + m.name + "': text cannot be encoded: " +
                (m.no_tokenizer_reason.empty() ? std::string("the GGUF file has no tokenizer (tokenizer.ggml.tokens)")
                                               : m.no_tokenizer_reason) +
                "\n  HINT: pass token ids with --tokens 1,2,3.");
  if (!m.tokenizer)
    throw Error("model '" + m.name + "' has no tokenizer.json or tokenizer.model, so text cannot be encoded\n"
                "  HINT: pass token ids with --tokens 1,2,3.");
  return m.tokenizer->encode(text);
}

namespace {
// The trace's size for T tokens, every layer counted with the widest layer's KV heads and
// head size (Gemma 4's global layers are wider): an upper bound.
double trace_bytes(const ModelConfig& c, int64_t T, bool compact, bool all_logits) {
  int kv = c.n_kv_head, d = c.head_size;
  for (int l = 0; l < c.n_layer; ++l)
    kv = std::max(kv, c.kv_heads_at(l)), d = std::max(d, c.head_size_at(l));
  return Trace::estimate_bytes(c.n_layer, c.n_head, kv, d, c.n_embd, c.vocab_size, T, compact, all_logits);
}
}  // namespace

void check_trace_memory(const ModelConfig& c, int64_t T, bool compact, bool all_logits) {
  // Counted in double: no overflow, and exact enough for a refusal.
  const double bytes = trace_bytes(c, T, compact, all_logits);
  if (bytes > 64e6)  // small traces need no look at /proc/meminfo
    check_memory(bytes, "recording attention over " + std::to_string(T) + " tokens",
                 "use a smaller --block-size or a shorter text.");
}

void row_logits(const Model& m, const Trace& tr, int i, std::vector<float>& out) {
  const int V = m.config.vocab_size, C = m.config.n_embd;
  if (const float* held = tr.logits_row(i)) {
    out.assign(held, held + V);
    return;
  }
  if (i < 0 || i >= tr.T() || tr.final_hidden.shape != std::vector<int64_t>{tr.T(), C})
    throw Error("no logits for row " + std::to_string(i) + " of a trace of " + std::to_string(tr.T()) + " tokens");
  const Mat h = Eigen::Map<const Mat>(tr.final_hidden.data.data() + static_cast<size_t>(i) * C, 1, C);  // (1, C)
  Mat y(1, V);
  linear_bt(h, m.weights.unembedding(), y);  // (1, V)
  finish_logits(m.config, y.data(), V);
  out.assign(y.data(), y.data() + V);
}

WindowLimit window_limit_for_memory(const ModelConfig& c, bool compact, double bytes) {
  auto need = [&](int64_t T) {
    return trace_bytes(c, T, compact, false);
  };
  const int64_t n_ctx = std::max(1, c.n_ctx);
  if (need(n_ctx) <= bytes) return {n_ctx, 0.0};
  int64_t lo = 1, hi = n_ctx;  // need(lo) ≤ bytes or lo = 1; need(hi) > bytes; the estimate grows with T
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (need(mid) <= bytes ? lo : hi) = mid;
  }
  return {lo, need(n_ctx)};
}

WindowLimit typing_window_limit(const ModelConfig& c, bool compact, double bytes) {
  WindowLimit w = window_limit_for_memory(c, compact, bytes / kTypingTraceCopies);
  w.bytes_at_n_ctx *= kTypingTraceCopies;
  return w;
}

// A trace, how many pointers share() gave out to it are alive, and what runs on the other
// slots rewrote since this one was last brought up to date.
struct Engine::Slot {
  Trace trace;
  std::atomic<int> leases{0};  // decremented (release) by the last copy of a shared pointer
  int stale_row = kNone;       // rows [stale_row, T) of every layer may differ from the current trace
  int stale_layer = kNone;     // every row of layers ≥ stale_layer may differ
  bool stale_all = true;       // nothing is known to match: copy it whole
  static constexpr int kNone = 1 << 30;
};

Engine::Engine(std::shared_ptr<const Model> model, std::unique_ptr<Backend> backend)
    : model_(std::move(model)), backend_(std::move(backend)), block_size_(model_->config.n_ctx),
      slot_(std::make_shared<Slot>()) {
  Trace& tr = slot_->trace;
  tr.model = model_->name;
  tr.backend = backend_->name();
  if (const char* e = std::getenv("ATTNVIZ_TRACE_MATRICES")) {
    const std::string v = e;
    if (v == "keep") matrices_ = Matrices::kKeep;
    else if (v == "recompute") matrices_ = Matrices::kRecompute;
    else if (v != "auto" && !v.empty())
      throw Error("ATTNVIZ_TRACE_MATRICES='" + excerpt(v, 20) + "' is not keep, recompute or auto", ErrorKind::Usage);
  }
}

void Engine::set_all_logits(bool all) {
  if (all != all_logits_) clear_cache();
  all_logits_ = all;
}

void Engine::set_summaries(bool on) {
  if (on != summaries_) clear_cache();
  summaries_ = on;
}

void Engine::set_matrices(Matrices m) {
  if (m != matrices_) clear_cache();
  matrices_ = m;
}

bool Engine::compact_for(int64_t T) const {
  if (!backend_->can_compact() || matrices_ == Matrices::kKeep) return false;
  if (matrices_ == Matrices::kRecompute) return true;
  const ModelConfig& c = model_->config;
  return 2.0 * c.n_layer * c.n_head * static_cast<double>(T) * T * sizeof(float) > kKeepMatricesBytes;
}

void Engine::set_block_size(int block_size) {
  if (block_size < 1 || block_size > model_->config.n_ctx)
    throw Error("block size " + std::to_string(block_size) + " is out of range: the model '" + model_->name +
                    "' takes 1 … " + std::to_string(model_->config.n_ctx) + " tokens",
                ErrorKind::Usage);
  // The cached window stays what it is when nothing was cropped from it and it fits the new
  // size (a memory cap lowering a block_size the text never reached): keep the cache.
  const Trace& tr = slot_->trace;
  if (block_size != block_size_ && !(tr.dropped == 0 && tr.T() <= block_size)) clear_cache();
  block_size_ = block_size;
}

void Engine::set_ablation(const Ablation& a) {
  if (a == backend_->ablation()) return;
  const int L = model_->config.n_layer;
  stale_from_layer_ = std::min({stale_from_layer_, a.first_layer(L), backend_->ablation().first_layer(L)});
  backend_->set_ablation(a);
}

void Engine::clear_cache() { cache_valid_ = false; }

const Trace& Engine::trace() const { return slot_->trace; }

std::shared_ptr<const Trace> Engine::share() {
  std::shared_ptr<Slot> s = slot_;
  s->leases.fetch_add(1, std::memory_order_relaxed);
  // The pointer owns a reference to the slot, so the trace outlives the engine if need be.
  return std::shared_ptr<const Trace>(&s->trace, [s](const Trace*) { s->leases.fetch_sub(1, std::memory_order_release); });
}

namespace {
// Acquire: whatever a released pointer's holder read of a trace happens before we write it.
bool released(const std::shared_ptr<Engine::Slot>& s) { return s->leases.load(std::memory_order_acquire) == 0; }
}  // namespace

std::shared_ptr<Engine::Slot> Engine::free_spare(bool make) {
  // Slots still shared stay listed (they come back once released); of the released ones one
  // is kept as the spare, more would only hold memory.
  std::shared_ptr<Slot> spare;
  for (auto it = older_.begin(); it != older_.end();)
    if (released(*it)) {
      if (!spare) spare = std::move(*it);
      it = older_.erase(it);
    } else {
      ++it;
    }
  if (!spare && make) spare = std::make_shared<Slot>();
  if (spare) {  // brought up to date with the current trace
    if (spare->stale_all) copy_changed(spare->trace, slot_->trace, 0, 0);  // whole, keeping the room to grow
    else if (spare->stale_row < Slot::kNone || spare->stale_layer < Slot::kNone)
      copy_changed(spare->trace, slot_->trace, spare->stale_row, spare->stale_layer);
    spare->stale_all = false;
    spare->stale_row = spare->stale_layer = Slot::kNone;
  }
  return spare;
}

void Engine::take_unshared_slot() {
  const bool switching = !released(slot_);
  std::shared_ptr<Slot> spare = free_spare(switching);
  if (switching) {
    slot_->stale_row = slot_->stale_layer = Slot::kNone;  // equal to the new current trace, until a run changes that
    slot_->stale_all = false;
    std::swap(spare, slot_);
  }
  if (spare) older_.push_back(std::move(spare));
}

void Engine::mark_changed(int from_row, int from_layer) {
  for (const std::shared_ptr<Slot>& s : older_) {
    s->stale_row = std::min(s->stale_row, from_row);
    s->stale_layer = std::min(s->stale_layer, from_layer);
  }
}

const Trace& Engine::run(const std::vector<int>& ids) {
  check_token_ids(ids, model_->config.vocab_size);
  take_unshared_slot();
  Trace& tr = slot_->trace;
  const int total = static_cast<int>(ids.size());
  const int dropped = total > block_size_ ? total - block_size_ : 0;
  const std::vector<int> window(ids.begin() + dropped, ids.end());
  const bool compact = compact_for(static_cast<int64_t>(window.size()));
  const bool all_logits = all_logits_ || !backend_->can_last_logits();
  check_trace_memory(model_->config, static_cast<int64_t>(window.size()), compact, all_logits);
  if (compact != tr.compact || all_logits != tr.all_logits || summaries_ != tr.summaries)
    cache_valid_ = false;  // another layout
  tr.compact = compact;
  tr.all_logits = all_logits;
  tr.summaries = summaries_;
  // The products' arithmetic (set_arith) may have changed since the cache was computed.
  const char* ar = arith_name(backend_->uses_stored_products() ? arith_for(model_->weights, arith()) : Arith::F32);
  if (tr.arith != ar) cache_valid_ = false;
  tr.arith = ar;

  last_from_layer_ = 0;
  if (stale_from_layer_ < model_->config.n_layer) {  // the ablation changed since the last run
    const int layer = stale_from_layer_;
    stale_from_layer_ = 1 << 30;
    const bool same = cache_valid_ && dropped == tr.dropped && window == tr.tokens;
    cache_valid_ = false;  // stays false if the backend throws half-way: the next run starts over
    if (same) mark_changed(Slot::kNone, layer);
    if (same && backend_->forward_from_layer(*model_, window, layer, tr)) {
      last_from_ = 0;
      last_from_layer_ = layer;
      cache_valid_ = true;
      return tr;
    }
  }
  stale_from_layer_ = 1 << 30;
  // Reuse the cache for the common prefix, if the window still starts at the same token.
  int from = 0;
  if (cache_valid_ && dropped == tr.dropped) {
    const auto& old = tr.tokens;
    while (from < static_cast<int>(old.size()) && from < static_cast<int>(window.size()) &&
           old[from] == window[from])
      ++from;
    if (from == static_cast<int>(window.size()) && from == static_cast<int>(old.size()) && !partial_) {
      last_from_ = from;  // nothing changed
      return tr;
    }
    // The last row must be recomputed even when the new window is a prefix of the old.
    if (from == static_cast<int>(window.size())) --from;
    if (backend_->ablation().needs_full_recompute()) from = 0;
  }
  cache_valid_ = false;  // stays false if the backend throws half-way
  tr.block_size = block_size_;
  tr.dropped = dropped;
  mark_changed(from, Slot::kNone);
  try {
    backend_->forward(*model_, window, from, tr);
  } catch (const Cancelled&) {
    // Rows [0, from) of every layer are as they were (the trace was re-laid out keeping
    // them); the rows after are partly written. Only the kept prefix counts as cached.
    tr.tokens.resize(static_cast<size_t>(from));
    cache_valid_ = from > 0;
    partial_ = true;  // the tensors are laid out for the cancelled window: the next run must run
    throw;
  }
  partial_ = false;
  last_from_ = from;
  cache_valid_ = true;
  if (room_to_grow_) {
    reserve_trace_rows(tr, tr.T() + 1, tr.T() + tr.T() / 4 + 16);  // room for the next key (kTypingTraceCopies)
    // A whole window was laid out (a text loaded, an edit at its start, the window slid):
    // the second trace the next key needs is copied now, as part of this long run, instead
    // of holding up that key. After other runs it costs only the rows they changed, later.
    if (from == 0) older_.push_back(free_spare(true));
  }
  return tr;
}

const Trace& Engine::run_text(const std::string& text) { return run(encode_text(*model_, text)); }

}  // namespace attnviz
