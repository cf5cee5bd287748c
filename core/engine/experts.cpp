#include "core/engine/experts.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "core/engine/stored_product.h"

namespace attnviz {

// GPT-OSS's mixture of experts (ModelConfig::Experts) on hm (n, C), the normed rows
// [p, p + n): out (n, C) = Σ over each row's K chosen experts of weight · expert(row). The
// router's logits and each row's choice go into lt's router, experts and expert_weights
// (when lt has them). Rows are grouped by expert, so each expert's matrices are read once.
void experts_branch(const ModelConfig& c, const LayerWeights& lw, const Mat& hm, int p, LayerTrace* lt, Mat& out) {
  const int n = static_cast<int>(hm.rows()), C = c.n_embd, I = c.n_inner, E = c.experts.count, K = c.experts.top_k;
  Mat logits;
  linear(hm, lw.router, lw.router_b, logits);  // (n, E)
  std::vector<std::vector<std::pair<int, float>>> rows_of(static_cast<size_t>(E));  // expert → (row, weight)
  const bool record = lt && !lt->router.shape.empty();
  std::vector<int> order(static_cast<size_t>(E));
  for (int r = 0; r < n; ++r) {
    std::iota(order.begin(), order.end(), 0);
    // The K largest logits, largest first (ties: the lower index first).
    std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int a, int b) {
      return logits(r, a) > logits(r, b) || (logits(r, a) == logits(r, b) && a < b);
    });
    const float mx = logits(r, order[0]);
    double z = 0;
    for (int k = 0; k < K; ++k) z += std::exp(static_cast<double>(logits(r, order[static_cast<size_t>(k)]) - mx));
    for (int k = 0; k < K; ++k) {
      const int e = order[static_cast<size_t>(k)];
      const float wgt = static_cast<float>(std::exp(static_cast<double>(logits(r, e) - mx)) / z);
      rows_of[static_cast<size_t>(e)].push_back({r, wgt});
    }
    if (record) {
      std::copy_n(&logits(r, 0), E, lt->router.data.data() + static_cast<int64_t>(p + r) * E);
      for (int k = 0; k < K; ++k) {
        const int e = order[static_cast<size_t>(k)];
        lt->experts.data[static_cast<size_t>(static_cast<int64_t>(p + r) * K + k)] = static_cast<float>(e);
        lt->expert_weights.data[static_cast<size_t>(static_cast<int64_t>(p + r) * K + k)] =
            rows_of[static_cast<size_t>(e)].back().second;
      }
    }
  }
  out.setZero(n, C);
  const float limit = c.experts.limit, alpha = c.experts.alpha;
  Mat xe, g, u, h, y;
  for (int e = 0; e < E; ++e) {
    const auto& rows = rows_of[static_cast<size_t>(e)];
    if (rows.empty()) continue;
    const int m = static_cast<int>(rows.size());
    xe.resize(m, C);
    for (int i = 0; i < m; ++i) xe.row(i) = hm.row(rows[static_cast<size_t>(i)].first);
    const size_t es = static_cast<size_t>(e);
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
    for (int i = 0; i < m; ++i) out.row(rows[static_cast<size_t>(i)].first) += rows[static_cast<size_t>(i)].second * y.row(i);
  }
}

}  // namespace attnviz
