#include "core/engine/delta_trace.h"

#include <algorithm>
#include <cmath>

#include "core/engine/delta_rule.h"
#include "core/engine/head_summary.h"

namespace attnviz {

bool delta_continues(const LinearAttnDims& ld, const LayerTrace& lt, int p) {
  const size_t per_layer = static_cast<size_t>(ld.v_heads) * ld.k_dim * ld.v_dim;
  return p > 0 && lt.state_rows == p && lt.state_final.size() == per_layer;
}

void delta_state_before(const LinearAttnDims& ld, const LayerTrace& lt, int j, int p, float* S) {
  const int dk = ld.k_dim, dv = ld.v_dim, Hv = ld.v_heads;
  const int64_t per_state = static_cast<int64_t>(dk) * dv;
  if (delta_continues(ld, lt, p)) {
    std::copy_n(lt.state_final.data() + j * per_state, per_state, S);
    return;
  }
  const int m = p / kStateEvery, from = m * kStateEvery;
  if (m > 0) std::copy_n(lt.state_snaps.data() + ((m - 1) * Hv + j) * per_state, per_state, S);
  else std::fill_n(S, per_state, 0.f);
  const int T = static_cast<int>(lt.beta.dim(1));
  delta_rule_head(lt.q.head(j), lt.k.head(j), lt.q.ld(), lt.v.head(j), lt.v.ld(), lt.beta.data.data() + int64_t{j} * T,
                  lt.decay.data.data() + int64_t{j} * T, from, p, dk, dv, S, nullptr, 0);
}

DeltaThumbs delta_thumbs_begin(LayerTrace& lt, int Hv, int T, int old_T, bool summaries) {
  DeltaThumbs d;
  d.old = std::move(lt.thumbs);
  d.old_bucket = lt.thumb_bucket;
  d.old_n = d.old.shape.empty() ? 0 : static_cast<int>(d.old.dim(1));
  d.old_T = old_T;
  lt.thumb_bucket = summaries ? thumb_bucket(T) : 0;
  const int tn = summaries ? thumb_cells(T, lt.thumb_bucket) : 0;
  lt.thumbs = summaries ? Tensor{{Hv, tn, tn}, FloatBuf(static_cast<size_t>(Hv) * tn * tn)} : Tensor{};
  return d;
}

void delta_head_rows(int j, int p, int T, bool summaries, const DeltaThumbs& old, LayerTrace& lt) {
  const float *qj = lt.q.head(j), *kj = lt.k.head(j);
  const int dk = static_cast<int>(lt.q.dim(2));
  const float* beta = lt.beta.data.data() + int64_t{j} * T;
  const float* g = lt.decay.data.data() + int64_t{j} * T;
  if (!lt.compact)
    delta_rule_rows(qj, kj, lt.q.ld(), beta, g, T, dk, p, T, lt.implicit.head(j) + p * lt.implicit.ld(), lt.implicit.ld());
  if (!summaries) return;
  // |A| into the thumbnail: rows [redo, T), stored or swept block by block
  const int tn = static_cast<int>(lt.thumbs.dim(1));
  float* thumb = lt.thumbs.head(j);
  const int redo = thumb_keep(old.old_n ? old.old.head(j) : nullptr, old.old_bucket, old.old_n, old.old_T, p,
                              lt.thumb_bucket, tn, thumb);
  constexpr int kRows = 64;
  std::vector<float> rows(static_cast<size_t>(kRows) * T);
  for (int r0 = redo; r0 < T; r0 += kRows) {
    const int r1 = std::min(T, r0 + kRows);
    if (lt.compact || r0 < p) delta_rule_rows(qj, kj, lt.q.ld(), beta, g, T, dk, r0, r1, rows.data(), T);
    for (int t = r0; t < r1; ++t) {
      const float* a = !lt.compact && r0 >= p ? lt.implicit.head(j) + t * lt.implicit.ld() : rows.data() + (t - r0) * T;
      float* m = rows.data() + (t - r0) * T;
      for (int s = 0; s <= t; ++s) m[s] = std::fabs(a[s]);
      thumb_add_row(m, t, lt.thumb_bucket, tn, thumb);
    }
  }
}

}  // namespace attnviz
