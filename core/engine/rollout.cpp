#include "core/engine/rollout.h"

namespace attnviz {

namespace {

// Rollout of every layer: out[l] = R_l (T, T), row-major, double.
std::vector<std::vector<double>> rollout_layers(const Trace& t, int last) {
  const int T = t.T();
  std::vector<double> R(static_cast<size_t>(T) * T, 0.0), A(R.size()), next(R.size());  // (T, T) each
  for (int i = 0; i < T; ++i) R[static_cast<size_t>(i) * T + i] = 1.0;  // before layer 0: the identity
  std::vector<std::vector<double>> out;
  std::vector<float> head;  // one head's probs, when the trace is compact
  for (int l = 0; l <= last; ++l) {
    const LayerTrace& lt = t.layers[l];
    const int H = static_cast<int>(lt.heads());
    for (size_t e = 0; e < A.size(); ++e) A[e] = e % (T + 1) == 0 ? 1.0 : 0.0;  // I
    for (int h = 0; h < H; ++h) {  // + the head-averaged weights, one head at a time
      const float* P = lt.head_values(Stage::Probs, h, head);  // (T, T)
      for (int i = 0; i < T; ++i)
        for (int j = 0; j <= i; ++j) A[static_cast<size_t>(i) * T + j] += P[static_cast<size_t>(i) * T + j] / H;
    }
    for (int i = 0; i < T; ++i) {
      double sum = 0;
      for (int j = 0; j < T; ++j) sum += A[static_cast<size_t>(i) * T + j];
      for (int j = 0; j < T; ++j) A[static_cast<size_t>(i) * T + j] /= sum;
    }
    for (int i = 0; i < T; ++i)  // next = Â_l · R
      for (int j = 0; j < T; ++j) {
        double s = 0;
        for (int k = j; k <= i; ++k) s += A[static_cast<size_t>(i) * T + k] * R[static_cast<size_t>(k) * T + j];
        next[static_cast<size_t>(i) * T + j] = s;
      }
    R.swap(next);
    out.push_back(R);
  }
  return out;
}

}  // namespace

std::vector<float> attention_rollout(const Trace& t, int layer) {
  const auto all = rollout_layers(t, layer);
  return std::vector<float>(all.back().begin(), all.back().end());
}

Tensor attention_rollout_all(const Trace& t) {
  const int L = static_cast<int>(t.layers.size()), T = t.T();
  Tensor out{{L, T, T}, {}};
  if (L == 0) return out;
  for (const auto& r : rollout_layers(t, L - 1)) out.data.insert(out.data.end(), r.begin(), r.end());
  return out;
}

}  // namespace attnviz
