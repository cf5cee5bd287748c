// How much the model's prediction of the current text relies on each head: the mean
// next-token loss with that head alone ablated (zero and mean), minus the loss without.
#pragma once
#include <functional>
#include <vector>

#include "core/engine/engine.h"
#include "core/engine/trace.h"

namespace attnviz {

// −log softmax(row)[target] in nats, for one row of V logits (log-sum-exp with the max
// subtracted, in double).
double next_token_loss(const float* logits_row, int V, int target);

// Mean over i in [0, T−1) of next_token_loss(logits[i], tokens[i+1]): how well the trace's
// own text was predicted, in nats. 0 when T < 2 (nothing to predict).
double mean_next_token_loss(const Trace& t);

struct HeadImportance {
  int layer = 0, head = 0;
  double zero = 0, mean = 0;  // loss with the head ablated (zero, mean) − the clean loss, nats
};

struct ImportanceGrid {
  double base_loss = 0;  // the clean mean next-token loss of the window, nats
  int targets = 0;       // tokens predicted (T − 1)
  bool complete = false; // false when `progress` stopped it; then `heads` holds the heads done
  std::vector<HeadImportance> heads;  // (L·H) layer-major
};

// Runs `ids` (the last block_size of them, as Engine::run) clean, then once per head and
// mode with that head alone ablated: 1 + 2·L·H passes. `progress(done, total)` is called
// after each pass; returning false stops early. The engine's ablation is restored after.
ImportanceGrid head_importance(Engine& engine, const std::vector<int>& ids,
                               const std::function<bool(int, int)>& progress = {});

}  // namespace attnviz
