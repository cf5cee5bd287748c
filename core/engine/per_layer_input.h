// Gemma 4's per-layer embeddings: what every layer adds to the stream from the token itself
// (the GPU backend uploads them; both backends add them through the layer's own gate).
#pragma once
#include <vector>

#include "core/engine/ops.h"
#include "core/model/model.h"

namespace attnviz {

// Gemma 4's per-layer embeddings of rows [p, T): (T − p, L·P), layer l's in columns
// [l·P, (l + 1)·P): (table row·√P + RMSNorm per layer of (e·W_proj)·C^−½)·2^−½, e the token's
// embedding as the first layer gets it (× √C). Ids past the table's rows look up nothing.
Mat per_layer_embeddings(const Model& m, const std::vector<int>& tokens, int p);

}  // namespace attnviz
