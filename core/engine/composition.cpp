#include "core/engine/composition.h"

#include <Eigen/Eigenvalues>
#include <cmath>

#include "core/engine/backend.h"

namespace attnviz {

namespace {

using MatD = Eigen::MatrixXd;

// S (d, d) with S·Sᵀ = G, for a symmetric positive semi-definite Gram matrix G.
MatD gram_root(const MatD& G) {
  const Eigen::SelfAdjointEigenSolver<MatD> es(G);
  return es.eigenvectors() * es.eigenvalues().cwiseMax(0.0).cwiseSqrt().asDiagonal();
}

// One softmax layer's weights per head as float64, the norms' weights folded in.
struct HeadWeights {
  std::vector<MatD> Q, O;  // (H): W_Q,h (C, d); W_O,h (d, C)
  std::vector<MatD> K, V;  // (KV): W_K,g, W_V,g (C, d)
};

HeadWeights head_weights(const ModelConfig& c, const LayerWeights& lw) {
  const int H = c.n_head, KV = c.n_kv_head, d = c.head_size;
  Mat wq = lw.wq.linear_f32(), wk = lw.wk.linear_f32(), wv = lw.wv.linear_f32(), wo = lw.wo.linear_f32();
  if (lw.norm1_w.size()) {  // diag(w)·W: the input norm's weight
    wq = lw.norm1_w.transpose().asDiagonal() * wq;
    wk = lw.norm1_w.transpose().asDiagonal() * wk;
    wv = lw.norm1_w.transpose().asDiagonal() * wv;
  }
  if (lw.post_attn_norm.size()) wo = wo * lw.post_attn_norm.transpose().asDiagonal();  // W_O·diag(w): the post-norm's
  HeadWeights hw;
  for (int h = 0; h < H; ++h) {
    hw.Q.push_back(wq.middleCols(static_cast<Eigen::Index>(h) * d, d).cast<double>());
    hw.O.push_back(wo.middleRows(static_cast<Eigen::Index>(h) * d, d).cast<double>());
  }
  for (int g = 0; g < KV; ++g) {
    hw.K.push_back(wk.middleCols(static_cast<Eigen::Index>(g) * d, d).cast<double>());
    hw.V.push_back(wv.middleCols(static_cast<Eigen::Index>(g) * d, d).cast<double>());
  }
  return hw;
}

// The (d, d) roots of each head's Gram matrices and its two norms.
struct HeadGrams {
  std::vector<MatD> Sq, So;  // (H): roots of W_Qᵀ·W_Q and W_O·W_Oᵀ
  std::vector<MatD> Sk, Sv;  // (KV): roots of W_Kᵀ·W_K and W_Vᵀ·W_V
  std::vector<double> nqk, nov;  // (H) ‖W_QK‖_F, ‖W_OV‖_F
};

HeadGrams head_grams(const ModelConfig& c, const HeadWeights& hw) {
  HeadGrams g;
  std::vector<MatD> Gk, Gv;
  for (size_t j = 0; j < hw.K.size(); ++j) {
    Gk.push_back(hw.K[j].transpose() * hw.K[j]);
    Gv.push_back(hw.V[j].transpose() * hw.V[j]);
    g.Sk.push_back(gram_root(Gk.back()));
    g.Sv.push_back(gram_root(Gv.back()));
  }
  for (int h = 0; h < c.n_head; ++h) {
    const MatD Gq = hw.Q[static_cast<size_t>(h)].transpose() * hw.Q[static_cast<size_t>(h)];
    const MatD Go = hw.O[static_cast<size_t>(h)] * hw.O[static_cast<size_t>(h)].transpose();
    const size_t kv = static_cast<size_t>(c.kv_head_of(h));
    g.Sq.push_back(gram_root(Gq));
    g.So.push_back(gram_root(Go));
    g.nqk.push_back(std::sqrt(std::max(0.0, (Gq * Gk[kv]).trace())));  // ‖W_Q·W_Kᵀ‖² = tr(Gq·Gk)
    g.nov.push_back(std::sqrt(std::max(0.0, (Gv[kv] * Go).trace())));  // ‖W_V·W_O‖² = tr(Gv·Go)
  }
  return g;
}

}  // namespace

Composition head_composition(const Model& m, const std::atomic<bool>* cancel) {
  const ModelConfig& c = m.config;
  c.require_uniform_layers("head composition");
  const int L = c.n_layer, H = c.n_head, d = c.head_size, C = c.n_embd;
  Composition out;
  out.L = L;
  out.H = H;
  const size_t n = static_cast<size_t>(L) * H * L * H;
  out.q.assign(n, 0.f);
  out.k.assign(n, 0.f);
  out.v.assign(n, 0.f);
  // Per softmax layer: left (H·d, C), rows of head h1 Sv_gᵀ·W_O,h1 (its output side), and
  // the norms; the right sides are built for each later layer as it comes.
  std::vector<Mat> left(static_cast<size_t>(L));
  std::vector<std::vector<double>> nqk(static_cast<size_t>(L)), nov(static_cast<size_t>(L));
  std::vector<bool> softmax(static_cast<size_t>(L));
  for (int l2 = 0; l2 < L; ++l2) {
    if (cancel && cancel->load()) throw Cancelled();
    softmax[static_cast<size_t>(l2)] = c.layer(l2).mixer == Mixer::Softmax;
    if (!softmax[static_cast<size_t>(l2)]) continue;
    const HeadWeights hw = head_weights(c, m.weights.layers[static_cast<size_t>(l2)]);
    const HeadGrams g = head_grams(c, hw);
    nqk[static_cast<size_t>(l2)] = g.nqk;
    nov[static_cast<size_t>(l2)] = g.nov;
    // The right sides (C, H·d), columns of head h2: W_Q,h2·Sk_g (Q), W_K,g·Sq_h2 (K), W_V,g·So_h2 (V).
    Mat rq(C, H * d), rk(C, H * d), rv(C, H * d), lf(H * d, C);
    for (int h = 0; h < H; ++h) {
      const size_t hs = static_cast<size_t>(h), kv = static_cast<size_t>(c.kv_head_of(h));
      rq.middleCols(h * d, d) = (hw.Q[hs] * g.Sk[kv]).cast<float>();
      rk.middleCols(h * d, d) = (hw.K[kv] * g.Sq[hs]).cast<float>();
      rv.middleCols(h * d, d) = (hw.V[kv] * g.So[hs]).cast<float>();
      lf.middleRows(h * d, d) = (g.Sv[kv].transpose() * hw.O[hs]).cast<float>();
    }
    for (int l1 = 0; l1 < l2; ++l1) {
      if (!softmax[static_cast<size_t>(l1)]) continue;
      const Mat& lt = left[static_cast<size_t>(l1)];
      const Mat pq = lt * rq, pk = lt * rk, pv = lt * rv;  // (H·d, H·d): block (h1, h2) is a (d, d) product
      for (int h1 = 0; h1 < H; ++h1)
        for (int h2 = 0; h2 < H; ++h2) {
          const size_t at = ((static_cast<size_t>(l1) * H + h1) * L + l2) * H + h2;
          const double a = nov[static_cast<size_t>(l1)][static_cast<size_t>(h1)];
          const auto ratio = [&](const Mat& p, double b) {
            const double den = a * b;
            return den > 0 ? static_cast<float>(p.block(h1 * d, h2 * d, d, d).cast<double>().norm() / den) : 0.f;
          };
          out.q[at] = ratio(pq, g.nqk[static_cast<size_t>(h2)]);
          out.k[at] = ratio(pk, g.nqk[static_cast<size_t>(h2)]);
          out.v[at] = ratio(pv, g.nov[static_cast<size_t>(h2)]);
        }
    }
    left[static_cast<size_t>(l2)] = std::move(lf);
  }
  return out;
}

}  // namespace attnviz
