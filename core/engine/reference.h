// The slow, obvious reference: nanoGPT-style Head / MultiHeadAttention written as
// plain loops (q·k, ×1/√d, masked_fill −inf, softmax, weights·v, concat, projection) and
// the rest of the block likewise, accumulating in double. No Eigen arithmetic. Every fast
// path is tested against it.
#pragma once
#include <vector>

#include "core/engine/ablation.h"
#include "core/model/model.h"
#include "core/engine/trace.h"

namespace attnviz {

// Full forward of `window` (positions 0…T-1), recording every matrix. The heads in
// `ablation` have their output (T, d) replaced before the projection: by zeros, or by the
// mean of its T rows, or with a source by that run's outputs (patching).
Trace reference_forward(const Model& m, const std::vector<int>& window, const Ablation& ablation = {});

}  // namespace attnviz
