// The one interface every compute backend implements: the CPU backend
// (engine/cpu_backend.cpp, Eigen + OpenMP) and the OpenGL 4.3 compute backend
// (gpu/gl_backend.cpp, built with the ATTNVIZ_GPU option).
#pragma once
#include <atomic>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/ablation.h"
#include "core/model/model.h"
#include "core/engine/trace.h"

namespace attnviz {

// Shared between a running forward and the thread that may stop it: a backend that can
// (the CPU's) counts finished layers into `layers_done` and, when `cancel` is set, stops
// after the layer in hand by throwing Cancelled.
struct RunControl {
  std::atomic<bool> cancel{false};
  std::atomic<int> layers_done{0};
  std::atomic<int> layers_total{0};
  void reset(int total) {
    cancel = false;
    layers_done = 0;
    layers_total = total;
  }
};
struct Cancelled : std::exception {
  const char* what() const noexcept override { return "the computation was cancelled for a newer request"; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;  // "cpu", "gpu"

  // Runs `window` (T ids, positions 0..T-1) through the model, computing only positions
  // [from, T). Rows [0, from) of `trace` must hold an earlier result for the same first
  // `from` ids: their keys and values (trace.layers[l].k / .v) are the KV cache, reused
  // as they are. Every tensor of `trace` is resized to T and fully valid afterwards
  // (including the new columns of the earlier rows of scores and probs; scaled and masked
  // are not stored but derived from scores on request, see LayerTrace).
  virtual void forward(const Model& m, const std::vector<int>& window, int from, Trace& trace) = 0;

  // Recomputes every position of layers [layer, L) and the logits for `window`, which must be
  // what `trace` holds: the layers before `layer` are kept, and their output comes from
  // trace.layers[layer].resid. For a changed ablation whose first affected layer is
  // `layer`. Returns false, touching nothing, when the backend cannot (the trace lacks the
  // residual stream, or the backend does not keep it): then run a full forward.
  // With from_row > 0 only rows [from_row, T) are recomputed (from their rows of
  // trace.layers[layer].resid); rows [0, from_row) of layers [layer, L) are kept as they
  // are, their keys and values the KV cache (activation patching; false for a mean
  // ablation, whose rows depend on every row). A linear layer's memory before from_row
  // comes from its snapshot at or before it, the rows between replayed from the trace.
  virtual bool forward_from_layer(const Model& m, const std::vector<int>& window, int layer, Trace& trace,
                                  int from_row = 0) {
    (void)m, (void)window, (void)layer, (void)trace, (void)from_row;
    return false;
  }

  // Whether forward honours Trace::compact (records no (T, T) matrices; they are
  // recomputed from q and k on request, Trace::attention_rows). Both backends do.
  virtual bool can_compact() const { return false; }
  // Whether its products with stored weights are stored_product's, and so follow the
  // process's arithmetic (int8_product.h): the CPU's.
  virtual bool uses_stored_products() const { return false; }
  // Whether forward honours Trace::all_logits = false (the last row's logits and every
  // row's loss). The CPU's does; the GPU's writes every row's logits.
  virtual bool can_last_logits() const { return false; }

  // Device time of the last forward in milliseconds (GPU timer queries), or −1 when the
  // backend does not measure one (the CPU).
  virtual double last_device_ms() const { return -1; }

  // Heads whose output is replaced before the output projection in every later forward
  // (none by default); forward records it in Trace::ablation. With a `mean` ablation a
  // forward computes every position whatever `from` says (see needs_full_recompute).
  void set_ablation(Ablation a) { ablation_ = std::move(a); }
  const Ablation& ablation() const { return ablation_; }

  // Progress and cancellation of the forwards that follow (null: none).
  void set_control(RunControl* c) { control_ = c; }

 protected:
  Ablation ablation_;
  RunControl* control_ = nullptr;
};

std::unique_ptr<Backend> make_cpu_backend();

// "cpu" or "gpu". When the GPU backend cannot start (not built, no GL 4.3 / compute
// shaders, a shader that does not compile), returns the CPU backend and puts the reason
// in *fallback_note (which stays empty otherwise). Throws a usage Error for other names.
std::unique_ptr<Backend> make_backend(const std::string& name, std::string* fallback_note);

}  // namespace attnviz
