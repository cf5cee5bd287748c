// Attention rollout (Abnar & Zuidema 2020): an approximation of how much each input
// token flows into each position through all layers up to one, from the attention
// weights alone (it ignores the values, the output projections and the MLPs).
//
// Per layer l, with P_l the softmax weights (H, T, T):
//   Â_l = rows renormalised of (mean over heads of P_l + I)   (the residual path)
//   R_l = Â_l · Â_{l−1} · … · Â_0                              (T, T)
// Row i of R_l sums to 1; R_l[i][j] = 0 for j > i, as in every Â.
#pragma once
#include <vector>

#include "core/engine/trace.h"

namespace attnviz {

// R_layer (T, T) row-major, in float; accumulated in double. `layer` in [0, L).
std::vector<float> attention_rollout(const Trace& t, int layer);

// R_0 … R_{L−1} as one (L, T, T) tensor.
Tensor attention_rollout_all(const Trace& t);

}  // namespace attnviz
