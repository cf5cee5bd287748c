// Head ablation: a set of (layer, head) whose output, before the output projection, is
// replaced — by 0 (`zero`) or by its mean over the window's positions (`mean`). Every
// later layer and the logits then follow from the replaced outputs. Plain data plus the
// one function the backends and the reference apply.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/model/config.h"

namespace attnviz {

enum class AblationMode { Zero, Mean };
const char* ablation_mode_name(AblationMode m);  // "zero", "mean"

struct Ablation {
  AblationMode mode = AblationMode::Zero;
  std::vector<std::pair<int, int>> heads;  // (layer, head) pairs, sorted, no duplicates

  bool empty() const { return heads.empty(); }
  bool has(int layer, int head) const;
  bool has_layer(int layer) const;
  // The first layer with an ablated head; `n_layer` when none is.
  int first_layer(int n_layer) const;
  // `mean` depends on every position of the window: appending a token changes every row
  // of an ablated head, so such a pass cannot reuse earlier rows.
  bool needs_full_recompute() const { return mode == AblationMode::Mean && !heads.empty(); }
  // Adds (layer, head) when absent, removes it when present; keeps `heads` sorted.
  void toggle(int layer, int head);
  std::string to_string() const;  // "0:1,1:4" ("" when empty)
  bool operator==(const Ablation& o) const { return mode == o.mode && heads == o.heads; }
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
void ablate_head_output(AblationMode mode, float* O, int T, int d, int ld, int from);

}  // namespace attnviz
