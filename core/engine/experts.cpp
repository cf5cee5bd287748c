#include "core/engine/experts.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "core/engine/ops.h"
#include "core/engine/stored_product.h"

namespace attnviz {

namespace {

using Routes = std::vector<std::vector<std::pair<int, float>>>;  // expert → (row, weight)

// The K largest of a row's E scores, largest first (ties: the lower index first).
void top_k(const float* score, int E, int K, std::vector<int>& order) {
  order.resize(static_cast<size_t>(E));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + K, order.end(),
                    [&](int a, int b) { return score[a] > score[b] || (score[a] == score[b] && a < b); });
}

// Row r's choice into routes and, when lt records them, its logits, experts and weights.
void choose(int p, int r, const float* logits, int E, int K, const std::vector<int>& order, const std::vector<float>& w,
            Routes& routes, LayerTrace* lt) {
  for (int k = 0; k < K; ++k) routes[static_cast<size_t>(order[static_cast<size_t>(k)])].push_back({r, w[static_cast<size_t>(k)]});
  if (!lt || lt->router.shape.empty()) return;
  std::copy_n(logits, E, lt->router.data.data() + static_cast<int64_t>(p + r) * E);
  for (int k = 0; k < K; ++k) {
    lt->experts.data[static_cast<size_t>(static_cast<int64_t>(p + r) * K + k)] = static_cast<float>(order[static_cast<size_t>(k)]);
    lt->expert_weights.data[static_cast<size_t>(static_cast<int64_t>(p + r) * K + k)] = w[static_cast<size_t>(k)];
  }
}

// out (n, C) = Σ over each row's chosen experts of weight · expert(hm row), rows grouped by
// expert so that each expert's matrices are read once. GPT-OSS: biases, clamps and its GLU;
// Gemma 4: gelu_tanh(gate)·up.
void run_experts(const ModelConfig& c, const LayerWeights& lw, const Mat& hm, const Routes& routes, Mat& out) {
  const int C = c.n_embd, I = c.experts.width ? c.experts.width : c.n_inner, E = c.experts.count;
  out.setZero(hm.rows(), C);
  const float limit = c.experts.limit, alpha = c.experts.alpha;
  Mat xe, g, u, h, y;
  for (int e = 0; e < E; ++e) {
    const auto& rows = routes[static_cast<size_t>(e)];
    if (rows.empty()) continue;
    const int m = static_cast<int>(rows.size());
    xe.resize(m, C);
    for (int i = 0; i < m; ++i) xe.row(i) = hm.row(rows[static_cast<size_t>(i)].first);
    const size_t es = static_cast<size_t>(e);
    if (c.experts.gemma) {
      linear(xe, lw.ex_gate[es], Vec(), g);  // (m, I)
      linear(xe, lw.ex_up[es], Vec(), u);
      gelu_tanh_inplace(g);
      h = g.cwiseProduct(u);
      linear(h, lw.ex_down[es], Vec(), y);  // (m, C)
    } else {
      // Expert e's gate and up (m, I), biases included, through its Weights (float32, or the
      // rows a GGUF file stores: MXFP4 in place).
      linear(xe, lw.ex_gate[es], lw.ex_gate_b.segment(static_cast<Eigen::Index>(e) * I, I), g);
      linear(xe, lw.ex_up[es], lw.ex_up_b.segment(static_cast<Eigen::Index>(e) * I, I), u);
      h.resize(m, I);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < I; ++j) {
          const float gate = std::min(g(i, j), limit);
          const float up = std::clamp(u(i, j), -limit, limit);
          h(i, j) = (up + 1.f) * (gate / (1.f + std::exp(-alpha * gate)));
        }
      linear(h, lw.ex_down[es], lw.ex_down_b.segment(static_cast<Eigen::Index>(e) * C, C), y);  // (m, C)
    }
    for (int i = 0; i < m; ++i) out.row(rows[static_cast<size_t>(i)].first) += rows[static_cast<size_t>(i)].second * y.row(i);
  }
}

}  // namespace

// GPT-OSS's mixture of experts (ModelConfig::Experts) on hm (n, C), the normed rows
// [p, p + n): the router's logits (with bias), the K largest, a softmax over those.
void experts_branch(const ModelConfig& c, const LayerWeights& lw, const Mat& hm, int p, LayerTrace* lt, Mat& out) {
  const int n = static_cast<int>(hm.rows()), E = c.experts.count, K = c.experts.top_k;
  Mat logits;
  linear(hm, lw.router, lw.router_b, logits);  // (n, E)
  Routes routes(static_cast<size_t>(E));
  std::vector<int> order;
  std::vector<float> w(static_cast<size_t>(K));
  for (int r = 0; r < n; ++r) {
    top_k(&logits(r, 0), E, K, order);
    const float mx = logits(r, order[0]);
    double z = 0;
    for (int k = 0; k < K; ++k) z += std::exp(static_cast<double>(logits(r, order[static_cast<size_t>(k)]) - mx));
    for (int k = 0; k < K; ++k)
      w[static_cast<size_t>(k)] = static_cast<float>(std::exp(static_cast<double>(logits(r, order[static_cast<size_t>(k)]) - mx)) / z);
    choose(p, r, &logits(r, 0), E, K, order, w, routes, lt);
  }
  run_experts(c, lw, hm, routes, out);
}

void gemma4_experts_branch(const ModelConfig& c, const LayerWeights& lw, const Mat& x, int p, LayerTrace* lt, Mat& out) {
  const int n = static_cast<int>(x.rows()), C = c.n_embd, E = c.experts.count, K = c.experts.top_k;
  Mat z = x, logits, he;
  rms_norm_heads(z, 1, C, Vec(), c.norm_eps);  // no weight
  z.array().rowwise() *= (lw.router_scale.array() * static_cast<float>(1.0 / std::sqrt(static_cast<double>(C))));
  linear(z, lw.router, Vec(), logits);  // (n, E)
  Routes routes(static_cast<size_t>(E));
  std::vector<int> order;
  std::vector<float> w(static_cast<size_t>(K));
  for (int r = 0; r < n; ++r) {
    top_k(&logits(r, 0), E, K, order);  // the softmax keeps the order of the logits
    // The top K of the softmax over all E, renormalised: the softmax over those K alone.
    const float mx = logits(r, order[0]);
    double s = 0;
    for (int k = 0; k < K; ++k) s += std::exp(static_cast<double>(logits(r, order[static_cast<size_t>(k)]) - mx));
    for (int k = 0; k < K; ++k) {
      const int e = order[static_cast<size_t>(k)];
      w[static_cast<size_t>(k)] = static_cast<float>(std::exp(static_cast<double>(logits(r, e) - mx)) / s) * lw.expert_scale[e];
    }
    // Recorded by descending final weight (the per-expert scale can reorder the choice).
    std::vector<std::pair<float, int>> by_weight;
    for (int k = 0; k < K; ++k) by_weight.push_back({w[static_cast<size_t>(k)], order[static_cast<size_t>(k)]});
    std::stable_sort(by_weight.begin(), by_weight.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (int k = 0; k < K; ++k) w[static_cast<size_t>(k)] = by_weight[static_cast<size_t>(k)].first, order[static_cast<size_t>(k)] = by_weight[static_cast<size_t>(k)].second;
    choose(p, r, &logits(r, 0), E, K, order, w, routes, lt);
  }
  rms_norm(x, lw.norm2_experts, c.norm_eps, he);  // (n, C) the experts' input
  run_experts(c, lw, he, routes, out);
}

}  // namespace attnviz
