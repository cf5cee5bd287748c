// Why a head attends: one attention score split into what wrote the query side and what
// wrote the key side (`attnviz-cli qk`, the GUI's "Why this score").
//
// The scaled score s = scale·q_i·k_j (before any soft-cap and the mask) of head h in layer l
// is a bilinear function of the streams entering layer l at rows i and j once every norm's
// scale is frozen at its row: the input norm (LayerNorm's mean subtraction is linear), QK-norm,
// and the norms and gates inside the earlier branches (stream_parts.h). RoPE at positions i
// and j is a linear map of each part. So with the stream split into parts x_i = Σ_a p_a and
// x_j = Σ_b p_b, q_i = Σ_a q(p_a) and k_j = Σ_b k(p_b) (the projection biases and the input
// norm's bias going with the bias part), and s = Σ_a Σ_b scale·q(p_a)·k(p_b): a grid of terms
// whose sum is the score.
#pragma once
#include <vector>

#include "core/engine/stream_parts.h"
#include "core/engine/trace.h"
#include "core/model/model.h"

namespace attnviz {

struct ScoreAttribution {
  int layer = 0, head = 0, query = 0, key = 0;
  double score = 0;               // the run's scaled score (the trace's `scaled` at [head, query, key])
  std::vector<StreamPart> parts;  // (P) the same parts on both sides: embed, [pos], earlier heads and MLPs, bias
  std::vector<double> terms;      // (P, P) row a: query part a; column b: key part b
  std::vector<double> query_side; // (P) Σ_b terms[a][b]: what query part a contributes
  std::vector<double> key_side;   // (P) Σ_a terms[a][b]: what key part b contributes
  double sum = 0;                 // Σ terms (= score, to float rounding)
  int P() const { return static_cast<int>(parts.size()); }
  double term(int a, int b) const { return terms[static_cast<size_t>(a) * parts.size() + static_cast<size_t>(b)]; }
};

// The split of head `head`'s score from `query` to `key` in softmax layer `layer`. Usage
// Errors, each with the valid range: a layer, head, query or key out of range; a key after
// the query; a key outside a local layer's window; a layer whose mixer is not softmax
// attention (a gated-delta-rule or convolution layer, where no softmax score exists). A data
// Error when the trace lacks the residual stream or the head outputs (the CPU backend
// records them).
ScoreAttribution score_attribution(const Model& m, const Trace& tr, int layer, int head, int query, int key);

}  // namespace attnviz
