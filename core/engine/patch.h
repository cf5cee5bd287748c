// Activation patching: a run of prompt A in which one head's output (at every position),
// or the residual stream entering one layer at one position, is taken from a run of
// prompt B, and what that does to one number at one position of A: the logit of a target
// token, or the difference of two targets' logits.
//
// Each patched pass starts at the patched layer: the layers before it are A's, kept in a
// working trace (Backend::forward_from_layer); a residual-stream patch at position t also
// keeps rows [0, t) as the KV cache, since no earlier position sees it. Runs on the CPU
// backend, which keeps the residual stream.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/engine/trace.h"
#include "core/model/model.h"

namespace attnviz {

enum class PatchKind { Heads, Resid };

struct PatchRequest {
  PatchKind kind = PatchKind::Heads;
  int position = -1;            // the position of the metric; −1: the last
  std::vector<int> target_ids;  // A, or A and B (A − B); empty: A's predicted token at the position
  // true: a cell whose patched-in value equals A's own, bit for bit (the head's T × d
  // outputs, or the stream's row), is A's run and takes the clean metric without a pass;
  // a head pass starts at the first row where B's output differs, a stream pass at its
  // position, the rows before kept as the KV cache. false: every cell runs a pass over
  // every row of its layers (the tests compare those with the clean run bit for bit). A
  // residual-stream cell after the metric's position always takes the clean metric: the
  // position cannot see it.
  bool incremental = true;
};

struct PatchResult {
  std::string metric;            // "logit" (of target_ids[0]) or "logit_diff" (target_ids[0] − target_ids[1])
  int position = 0;
  std::vector<int> target_ids;   // (1 or 2)
  double clean = 0;              // the metric on A's run
  double other = 0;              // the metric on B's run
  // Heads: [L][H], the metric on A with head h of layer l taken from B at every position.
  // Resid: [L][T], the metric on A with the stream entering layer l at position t taken from B.
  std::vector<std::vector<double>> grid;
  int passes = 0;                // patched passes run (the other cells took the clean metric)
};

// The patching grid of `a` against `b` (ids of one window each; only the CPU backend is
// used). Errors: prompts of different lengths (a data Error naming both lengths), empty
// prompts or ids outside the vocabulary (data); a position outside the text or a target id
// outside the vocabulary, or more than two targets (usage). `progress(done, total)` is
// called after every cell; returning false stops the work by throwing Cancelled.
PatchResult activation_patching(const Model& m, const std::vector<int>& a, const std::vector<int>& b,
                                const PatchRequest& request,
                                const std::function<bool(int done, int total)>& progress = {});

// The metric of `target_ids` (one id: its logit; two: A − B) at `position` from a trace's
// final hidden state, each logit through its own row of the unembedding and the final
// soft-cap: the same product for A's, B's and every patched run.
double patch_metric(const Model& m, const Trace& tr, int position, const std::vector<int>& target_ids);

}  // namespace attnviz
