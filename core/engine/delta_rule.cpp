#include "core/engine/delta_rule.h"

#include <algorithm>
#include <cmath>
#include <vector>

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
  std::vector<double> delta(static_cast<size_t>(dv)), acc(static_cast<size_t>(dv));
  for (int t = t0; t < t1; ++t) {
    const float *qt = q + t * ldk, *kt = k + t * ldk, *vt = v + t * ldv;
    const float decay = static_cast<float>(std::exp(static_cast<double>(g[t])));
    for (int i = 0; i < dk * dv; ++i) S[i] *= decay;  // S ← e^g·S
    for (int j = 0; j < dv; ++j) delta[static_cast<size_t>(j)] = vt[j];
    for (int i = 0; i < dk; ++i) {  // δ = β·(v − Sᵀk)
      const float* Si = S + static_cast<int64_t>(i) * dv;
      for (int j = 0; j < dv; ++j) delta[static_cast<size_t>(j)] -= static_cast<double>(Si[j]) * kt[i];
    }
    for (int j = 0; j < dv; ++j) delta[static_cast<size_t>(j)] *= beta[t];
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int i = 0; i < dk; ++i) {  // S ← S + k·δᵀ; o = Sᵀq
      float* Si = S + static_cast<int64_t>(i) * dv;
      for (int j = 0; j < dv; ++j) {
        Si[j] = static_cast<float>(Si[j] + kt[i] * delta[static_cast<size_t>(j)]);
        acc[static_cast<size_t>(j)] += static_cast<double>(Si[j]) * qt[i];
      }
    }
    if (o)
      for (int j = 0; j < dv; ++j) o[t * ldo + j] = static_cast<float>(acc[static_cast<size_t>(j)]);
  }
}

void delta_rule_rows(const float* q, const float* k, int64_t ldk, const float* beta, const float* g, int T, int dk,
                     int r0, int r1, float* A, int64_t lda) {
  std::vector<double> w(static_cast<size_t>(dk));
  for (int t = r0; t < r1; ++t) {
    float* row = A + static_cast<int64_t>(t - r0) * lda;
    std::fill(row, row + T, 0.f);
    const float* qt = q + t * ldk;
    for (int i = 0; i < dk; ++i) w[static_cast<size_t>(i)] = qt[i];
    for (int s = t; s >= 0; --s) {
      const float* ks = k + s * ldk;
      double wk = 0;
      for (int i = 0; i < dk; ++i) wk += w[static_cast<size_t>(i)] * ks[i];
      const double a = beta[s] * wk;
      row[s] = static_cast<float>(a);
      const double decay = std::exp(static_cast<double>(g[s]));
      for (int i = 0; i < dk; ++i) w[static_cast<size_t>(i)] = decay * (w[static_cast<size_t>(i)] - a * ks[i]);
    }
  }
}

}  // namespace attnviz
