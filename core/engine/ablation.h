// Head ablation: a set of (layer, head) whose output, before the output projection, is
// replaced — by 0 (`zero`) or by its mean over the window's positions (`mean`). Every
// later layer and the logits then follow from the replaced outputs. Plain data plus the
// one function the backends and the reference apply.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/model/config.h"

namespace attnviz {

enum class AblationMode { Zero, Mean };
const char* ablation_mode_name(AblationMode m);  // "zero", "mean"

// Every head's output recorded by another run of a window of T tokens (activation
// patching, patch.h): what an Ablation with a source puts in place of the listed heads'.
struct HeadOutputs {
  int64_t T = 0, d = 0;
  std::vector<std::vector<float>> out;  // (L) of (H, T, d_l), dense: LayerTrace::out of that run
  std::vector<int64_t> d_of;            // (L) each layer's head size d_l (Gemma 4's differ); empty: d everywhere
  int64_t head_size(int layer) const { return d_of.empty() ? d : d_of[static_cast<size_t>(layer)]; }
  const float* head(int layer, int h) const {  // (T, d_l)
    return out[static_cast<size_t>(layer)].data() + h * T * head_size(layer);
  }
};

struct Ablation {
  AblationMode mode = AblationMode::Zero;
  std::vector<std::pair<int, int>> heads;  // (layer, head) pairs, sorted, no duplicates
  // Set (activation patching): the listed heads' outputs are replaced by `source`'s rows of
  // the same heads, whatever `mode` says; its T must be the window's. Only the CPU backend
  // and the reference apply it (the GPU backend refuses it).
  std::shared_ptr<const HeadOutputs> source = nullptr;

  bool empty() const { return heads.empty(); }
  bool has(int layer, int head) const;
  bool has_layer(int layer) const;
  // The first layer with an ablated head; `n_layer` when none is.
  int first_layer(int n_layer) const;
  // `mean` depends on every position of the window: appending a token changes every row
  // of an ablated head, so such a pass cannot reuse earlier rows.
  // A source holds every row of one window: so do its replacements.
  bool needs_full_recompute() const { return (mode == AblationMode::Mean || source) && !heads.empty(); }
  // Adds (layer, head) when absent, removes it when present; keeps `heads` sorted.
  void toggle(int layer, int head);
  std::string to_string() const;  // "0:1,1:4" ("" when empty)
  bool operator==(const Ablation& o) const { return mode == o.mode && heads == o.heads && source == o.source; }
  bool operator!=(const Ablation& o) const { return !(*this == o); }
};

// "L:H[,L:H...]" and "zero" | "mean" → an Ablation checked against the model. Throws a usage
// Error for a malformed list, a layer or head out of range, or a duplicate. An empty list
// is no ablation.
Ablation parse_ablation(const std::string& list, const std::string& mode, const ModelConfig& c);
AblationMode parse_ablation_mode(const std::string& mode);

// Replaces one head's output O (T, d), rows `ld` floats apart, rows [from, T):
//   zero: O[i] = 0
//   mean: O[i] = (1/T) Σ_t O[t] over all T rows, which must hold the unablated outputs
//         (so `from` must be 0 for `mean`, see needs_full_recompute).
//   with `source` (T, d) dense, whatever the mode: O[i] = source[i] (patching).
void ablate_head_output(AblationMode mode, float* O, int T, int d, int ld, int from, const float* source = nullptr);

// Throws a data Error when `a` has a source that does not fit a window of T tokens of a
// model of `n_layer` layers of `n_head` heads of size d.
void check_ablation_source(const Ablation& a, int T, int n_layer, int n_head, int d);
// The same for a model whose layers may differ in head size (ModelConfig::head_size_at).
void check_ablation_source(const Ablation& a, int T, const ModelConfig& c);

}  // namespace attnviz
