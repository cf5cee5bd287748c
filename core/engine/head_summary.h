// Per-head summaries that a forward pass computes while each attention row is in cache, so
// that head labels (score_heads) and the thumbnails of every head need no (T, T) matrix:
// O(T) numbers per head, and an append adds only the new rows.
#pragma once
#include <cstdint>
#include <vector>

namespace attnviz {

// Per (head, row i) of probs P: the terms that score_heads averages (see head_scores.h).
enum RowStat { kPrevious, kFirst, kSelf, kEntropyBits, kDistance, kInduction, kRowStats };

// For rows i in [from, T): the positions j + 1 < i just after earlier occurrences of
// tokens[i] (the keys an induction head attends to). (T − from) lists.
std::vector<std::vector<int>> induction_targets(const std::vector<int>& tokens, int from);

// The kRowStats terms of row i (P[i][0 … i]): P[i][i−1], P[i][0], P[i][i], the entropy in
// bits, Σ_j P[i][j]·(i − j), and Σ P[i][t] over `targets` (NaN when there are none).
void row_stats(const float* p_row, int i, const std::vector<int>& targets, float* out);

// Thumbnails: probs max-pooled over b × b cells, b the smallest power of two with
// ⌈T / b⌉ ≤ kThumbCells, so a grown window merges 2 × 2 cells instead of starting over.
constexpr int kThumbCells = 64;
int thumb_bucket(int T);
inline int thumb_cells(int T, int bucket) { return (T + bucket - 1) / bucket; }

// Folds row i of P (i + 1 visible entries) into a head's (n, n) thumbnail.
void thumb_add_row(const float* p_row, int i, int bucket, int n, float* thumb);

// Re-lays out one head's thumbnail for the rows kept by a pass that recomputes rows
// [from, T), `old` (n_old, n_old, bucket_old) holding rows [0, old_T) → `out` (n, n,
// bucket), zero where not kept. Returns the first row whose contribution is missing: rows
// [ret, from) must be added again with thumb_add_row (after an edit, the bucket row that
// also held replaced rows is cleared; an append, from ≥ old_T, keeps everything).
int thumb_keep(const float* old, int bucket_old, int n_old, int old_T, int from, int bucket, int n, float* out);

}  // namespace attnviz
