#include "core/engine/delta_rule.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Dense>

namespace attnviz {

void causal_conv(const float* x, int64_t ldx, int T, int Ch, const float* w, int K, int r0, float* out, int64_t ldo,
                 const float* bias, bool silu) {
  for (int t = r0; t < T; ++t) {
    float* o = out + static_cast<int64_t>(t - r0) * ldo;
    for (int ch = 0; ch < Ch; ++ch) {
      const float* wc = w + static_cast<int64_t>(ch) * K;
      float s = 0.f;
      for (int k = std::max(0, K - 1 - t); k < K; ++k) s += wc[k] * x[static_cast<int64_t>(t - (K - 1) + k) * ldx + ch];
      if (bias) s += bias[ch];
      o[ch] = silu ? s / (1.f + std::exp(-s)) : s;
    }
  }
}

void l2_normalize(float* x, int n, float scale) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float f = static_cast<float>(scale / std::sqrt(ss + 1e-6));
  for (int i = 0; i < n; ++i) x[i] *= f;
}

float softplus(float x) { return x > 20.f ? x : static_cast<float>(std::log1p(std::exp(static_cast<double>(x)))); }

void delta_rule_head(const float* q, const float* k, int64_t ldk, const float* v, int64_t ldv, const float* beta,
                     const float* g, int t0, int t1, int dk, int dv, float* S, float* o, int64_t ldo) {
  using RowVec = Eigen::Matrix<float, 1, Eigen::Dynamic>;
  Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> Sm(S, dk, dv);  // (dk, dv)
  RowVec delta(dv);
  for (int t = t0; t < t1; ++t) {
    const Eigen::Map<const RowVec> qt(q + t * ldk, dk), kt(k + t * ldk, dk), vt(v + t * ldv, dv);
    Sm *= std::exp(g[t]);                         // S ← e^g·S
    delta.noalias() = beta[t] * (vt - kt * Sm);   // δ = β·(v − Sᵀk), (1, dv)
    Sm.noalias() += kt.transpose() * delta;       // S ← S + k·δᵀ
    if (o) Eigen::Map<RowVec>(o + t * ldo, dv).noalias() = qt * Sm;  // o = Sᵀq
  }
}

void delta_rule_rows(const float* q, const float* k, int64_t ldk, const float* beta, const float* g, int T, int dk,
                     int r0, int r1, float* A, int64_t lda) {
  // Up to kRows rows at once, so that each key k_s is read once for all the rows that have
  // reached s (t ≥ s). Each row's dot product and update are its own vector operations, so
  // a row's values do not depend on the rows it is swept with (a pass's rows and a compact
  // trace's rows on demand are the same bits).
  constexpr int kRows = 32;
  using RowVec = Eigen::Matrix<float, 1, Eigen::Dynamic>;
  Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> W;  // (rows, dk): row i holds w of row b0 + i
  for (int b0 = r0; b0 < r1; b0 += kRows) {
    const int n = std::min(kRows, r1 - b0);
    W.resize(n, dk);
    for (int i = 0; i < n; ++i) {
      W.row(i) = Eigen::Map<const RowVec>(q + static_cast<int64_t>(b0 + i) * ldk, dk);
      float* row = A + static_cast<int64_t>(b0 - r0 + i) * lda;
      std::fill(row, row + T, 0.f);
    }
    for (int s = b0 + n - 1; s >= 0; --s) {
      const Eigen::Map<const RowVec> ks(k + static_cast<int64_t>(s) * ldk, dk);
      const float decay = std::exp(g[s]);
      for (int i = std::max(0, s - b0); i < n; ++i) {  // rows b0 + i with t ≥ s
        auto w = W.row(i);
        const float a = beta[s] * w.dot(ks);  // A[t, s] = β_s·(w·k_s)
        A[static_cast<int64_t>(b0 - r0 + i) * lda + s] = a;
        w = decay * (w - a * ks);  // w ← e^{g_s}·(w − A[t,s]·k_s)
      }
    }
  }
}

}  // namespace attnviz
