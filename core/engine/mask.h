// Which keys a query sees, and the soft-cap of scores: the rules of the masked and capped
// stages, shared by the trace (which derives those stages) and the ops (which compute
// them). i is the query's row, j the key's column, both positions in the window.
#pragma once
#include <cmath>
#include <cstdint>

namespace attnviz {

// Cells a causal mask hides: query i may not see key j > i.
inline bool causally_masked(int64_t i, int64_t j) { return j > i; }
// The first key query i sees: 0 on a global layer (window 0), i − W + 1 on a local one.
inline int window_first(int i, int window) { return window > 0 && i - window + 1 > 0 ? i - window + 1 : 0; }
inline int64_t window_first(int64_t i, int window) { return window > 0 && i - window + 1 > 0 ? i - window + 1 : 0; }
// Cells a layer's mask hides: j > i, and on a local layer of window W also j ≤ i − W, so
// that query i sees exactly the keys [i − W + 1, i].
inline bool attention_masked(int64_t i, int64_t j, int window) { return j > i || j < window_first(i, window); }
// Attention logit soft-capping (Gemma 2): c·tanh(x/c); x when c is 0.
inline float softcap_value(float x, float c) { return c > 0 ? c * std::tanh(x / c) : x; }

}  // namespace attnviz
