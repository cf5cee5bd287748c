// What a gated-delta-rule layer (Mixer::GatedDeltaNet) keeps in its trace between passes, as
// both backends use it: the memory before the first new row (from the last pass's end, or a
// snapshot and the rows after it replayed), and the rows recomputed from the recorded q, k,
// β and g (A's new rows, the |A| thumbnails). The backends compute q, k, v, β, g and o
// themselves (the CPU in Eigen, the GPU in shaders/delta_*.comp). Letters as delta_rule.h.
#pragma once
#include "core/engine/trace.h"
#include "core/model/config.h"

namespace attnviz {

// S (dk, dv), row-major, gets value head j's memory before row p: the last pass's end when
// p is where it stopped (an append), else the snapshot after the first m·kStateEvery ≤ p rows
// (zeros for m = 0) with the rows from there to p replayed from lt's q, k, v, β and g.
void delta_state_before(const LinearAttnDims& ld, const LayerTrace& lt, int j, int p, float* S);

// Whether delta_state_before continues the last pass's end (an append at p).
bool delta_continues(const LinearAttnDims& ld, const LayerTrace& lt, int p);

// The thumbnails of the last pass, set aside while lt.thumbs is sized for T rows.
struct DeltaThumbs {
  Tensor old;
  int old_bucket = 0, old_n = 0, old_T = 0;
};
// Moves lt.thumbs aside and sizes new ones (Hv, n, n) for T rows, or none without summaries.
DeltaThumbs delta_thumbs_begin(LayerTrace& lt, int Hv, int T, int old_T, bool summaries);

// For value head j, with q, k, β and g of rows [0, T) in lt: rows [p, T) of A into
// lt.implicit (unless lt.compact), and with summaries |A| max-pooled into lt.thumbs as a
// softmax layer's probs are, rows the old thumbnail lacks swept again.
void delta_head_rows(int j, int p, int T, bool summaries, const DeltaThumbs& old, LayerTrace& lt);

}  // namespace attnviz
