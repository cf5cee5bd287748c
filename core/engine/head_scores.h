// What each attention head does, as numbers read off a Trace: pure functions, used by
// `attnviz-cli heads` and by the GUI to label heads.
//
// For query row i of head (l, h) with weights P = layers[l].probs[h] (T, T):
//   previous_token = mean over i ≥ 1 of P[i][i-1]
//   first_token    = mean over i ≥ 1 of P[i][0]             (attention sink)
//   self           = mean over i ≥ 1 of P[i][i]                  (the diagonal)
//   entropy_bits   = mean over i ≥ 1 of −Σ_j P[i][j] · log2 P[i][j]  (0 · log 0 = 0)
//   mean_distance  = mean over i ≥ 1 of Σ_j P[i][j] · (i − j)     (tokens back)
//   induction      = mean over the rows i whose token occurred before at some j with
//                    j + 1 < i, of Σ_j P[i][j+1]  (the token just after each earlier
//                    occurrence); −1 when no row qualifies. On a random string repeated
//                    twice this is the usual score measured over the second repeat.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tokenize/tokenizer.h"
#include "core/engine/trace.h"

namespace attnviz {

struct HeadScore {
  int layer = 0, head = 0;
  float previous_token = 0, induction = -1, first_token = 0, self = 0;
  float entropy_bits = 0, mean_distance = 0;
  // GPT-OSS's learned sink: mean over i ≥ 1 of the probability row i gives the sink column
  // (LayerTrace::sink); −1 in a layer without sinks.
  float sink_mass = -1;
};

// One entry per (layer, head) of the softmax layers, layer-major (a hybrid's linear and
// convolution layers have no attention distribution to score).
std::vector<HeadScore> score_heads(const Trace& t);
// The entry of (layer, head) in score_heads' list, or null when it has none.
const HeadScore* find_score(const std::vector<HeadScore>& scores, int layer, int head);

// The strongest label of a head when its score passes `threshold` (0.4 by default):
// "previous-token", "induction", "first-token", "self", or "" for none.
std::string head_label(const HeadScore& s, float threshold = 0.4f);

// A random string repeated twice, for measuring induction: `len` distinct tokens (fewer
// when the vocabulary has fewer suitable ones) drawn from the tokenizer's ASCII letters
// and non-ASCII characters (any visible ASCII when those are too few; all ids when there
// is no tokenizer), then the same again.
std::vector<int> repeated_random_tokens(const Tokenizer* tok, int vocab_size, int len, uint64_t seed);

}  // namespace attnviz
