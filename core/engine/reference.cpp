#include "core/engine/reference.h"

#include <cmath>
#include <limits>

namespace attnviz {

namespace {

using Rows = std::vector<std::vector<double>>;  // [t][c]

Rows zeros(int rows, int cols) { return Rows(static_cast<size_t>(rows), std::vector<double>(static_cast<size_t>(cols), 0.0)); }

// y[t][o] = b[o] + Σ_c x[t][c] · W(c, o), for output columns [o0, o0 + n).
Rows linear_cols(const Rows& x, const Mat& W, const Vec& b, int o0, int n) {
  Rows y = zeros(static_cast<int>(x.size()), n);
  for (size_t t = 0; t < x.size(); ++t)
    for (int o = 0; o < n; ++o) {
      double s = b.size() ? b(o0 + o) : 0.0;
      for (size_t c = 0; c < x[t].size(); ++c) s += x[t][c] * W(static_cast<Eigen::Index>(c), o0 + o);
      y[t][o] = s;
    }
  return y;
}

Rows normalize(const ModelConfig& cfg, const Rows& x, const Vec& w, const Vec& b) {
  Rows y = x;
  for (size_t t = 0; t < x.size(); ++t) {
    const double C = static_cast<double>(x[t].size());
    double mean = 0, sq = 0;
    for (double v : x[t]) mean += v / C;
    if (cfg.arch == Arch::Gpt2) {
      for (double v : x[t]) sq += (v - mean) * (v - mean) / C;
      for (size_t c = 0; c < x[t].size(); ++c)
        y[t][c] = (x[t][c] - mean) / std::sqrt(sq + cfg.norm_eps) * w(static_cast<Eigen::Index>(c)) + b(static_cast<Eigen::Index>(c));
    } else {
      for (double v : x[t]) sq += v * v / C;
      for (size_t c = 0; c < x[t].size(); ++c) y[t][c] = x[t][c] / std::sqrt(sq + cfg.norm_eps) * w(static_cast<Eigen::Index>(c));
    }
  }
  return y;
}

// Rotate-half RoPE on one head's rows (position = row index), frequencies in double.
void rope(Rows& x, int d, const std::vector<double>& inv_freq) {
  const int half = d / 2;
  for (size_t t = 0; t < x.size(); ++t)
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(t) * inv_freq[static_cast<size_t>(i)];
      const double a = x[t][i], b = x[t][i + half];
      x[t][i] = a * std::cos(angle) - b * std::sin(angle);
      x[t][i + half] = b * std::cos(angle) + a * std::sin(angle);
    }
}

void store(const Rows& x, Tensor& t, int head) {
  for (size_t i = 0; i < x.size(); ++i)
    for (size_t j = 0; j < x[i].size(); ++j)
      t.data[(static_cast<size_t>(head) * x.size() + i) * x[i].size() + j] = static_cast<float>(x[i][j]);
}

}  // namespace

Trace reference_forward(const Model& m, const std::vector<int>& window, const Ablation& ablation) {
  const ModelConfig& cfg = m.config;
  const ModelWeights& w = m.weights;
  const int T = static_cast<int>(window.size()), C = cfg.n_embd, H = cfg.n_head, KV = cfg.n_kv_head,
            d = cfg.head_size;
  const double NEG_INF = -std::numeric_limits<double>::infinity();
  Trace tr;
  tr.model = m.name;
  tr.backend = "reference";
  tr.block_size = T;
  tr.tokens = window;
  tr.ablation = ablation;

  Rows x = zeros(T, C);
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < C; ++c)
      x[t][c] = w.tok_emb(window[t], c) + (cfg.arch == Arch::Gpt2 ? w.pos_emb(t, c) : 0.0);

  for (int l = 0; l < cfg.n_layer; ++l) {
    const LayerWeights& lw = w.layers[l];
    LayerTrace lt;
    for (Tensor* t : {&lt.q, &lt.out}) *t = Tensor{{H, T, d}, std::vector<float>(static_cast<size_t>(H * T * d))};
    for (Tensor* t : {&lt.k, &lt.v}) *t = Tensor{{KV, T, d}, std::vector<float>(static_cast<size_t>(KV * T * d))};
    for (Tensor* t : {&lt.scores, &lt.probs}) *t = Tensor{{H, T, T}, std::vector<float>(static_cast<size_t>(H * T * T))};
    lt.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));  // the trace derives scaled and masked

    const Rows h = normalize(cfg, x, lw.norm1_w, lw.norm1_b);
    Rows concat = zeros(T, H * d);
    for (int head = 0; head < H; ++head) {
      const int g = head / (H / KV);  // the KV head this query head reads
      Rows q = linear_cols(h, lw.wq, lw.bq, head * d, d);  // (T, d)
      Rows k = linear_cols(h, lw.wk, lw.bk, g * d, d);     // (T, d)
      Rows v = linear_cols(h, lw.wv, lw.bv, g * d, d);     // (T, d)
      if (cfg.arch == Arch::Llama) {
        rope(q, d, rope_inv_freq(cfg));
        rope(k, d, rope_inv_freq(cfg));
      }
      Rows wei = zeros(T, T), scaled = zeros(T, T), masked = zeros(T, T), probs = zeros(T, T), out = zeros(T, d);
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j) {
          for (int e = 0; e < d; ++e) wei[i][j] += q[i][e] * k[j][e];  // q @ k.T
          scaled[i][j] = wei[i][j] / std::sqrt(static_cast<double>(d));  // / sqrt(d)
          masked[i][j] = j > i ? NEG_INF : scaled[i][j];                  // masked_fill(tril == 0, -inf)
        }
      for (int i = 0; i < T; ++i) {  // softmax over each row
        double mx = NEG_INF, sum = 0;
        for (int j = 0; j < T; ++j) mx = std::max(mx, masked[i][j]);
        for (int j = 0; j < T; ++j) sum += std::exp(masked[i][j] - mx);
        for (int j = 0; j < T; ++j) probs[i][j] = std::exp(masked[i][j] - mx) / sum;
      }
      for (int i = 0; i < T; ++i)  // wei @ v
        for (int e = 0; e < d; ++e)
          for (int j = 0; j < T; ++j) out[i][e] += probs[i][j] * v[j][e];
      if (ablation.has(l, head)) {  // the head switched off: its output replaced
        std::vector<double> mean(static_cast<size_t>(d), 0.0);
        for (int t = 0; t < T; ++t)
          for (int e = 0; e < d; ++e) mean[e] += out[t][e] / T;
        for (int t = 0; t < T; ++t)
          for (int e = 0; e < d; ++e) out[t][e] = ablation.mode == AblationMode::Mean ? mean[e] : 0.0;
      }
      for (int t = 0; t < T; ++t)
        for (int e = 0; e < d; ++e) concat[t][head * d + e] = out[t][e];  // torch.cat(heads)
      store(q, lt.q, head);
      if (head % (H / KV) == 0) {
        store(k, lt.k, g);
        store(v, lt.v, g);
      }
      store(wei, lt.scores, head);
      store(probs, lt.probs, head);
      store(out, lt.out, head);
    }
    const Rows proj = linear_cols(concat, lw.wo, lw.bo, 0, C);  // output projection
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < C; ++c) x[t][c] += proj[t][c];

    const Rows h2 = normalize(cfg, x, lw.norm2_w, lw.norm2_b);
    const int I = cfg.n_inner;
    Rows a = linear_cols(h2, lw.w_fc, lw.b_fc, 0, I);
    if (cfg.arch == Arch::Gpt2) {
      for (auto& row : a)
        for (double& u : row) u = 0.5 * u * (1 + std::tanh(std::sqrt(2 / M_PI) * (u + 0.044715 * u * u * u)));
    } else {
      const Rows up = linear_cols(h2, lw.w_up, Vec(), 0, I);
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < I; ++i) a[t][i] = a[t][i] / (1 + std::exp(-a[t][i])) * up[t][i];
    }
    const Rows mlp = linear_cols(a, lw.w_down, lw.b_down, 0, C);
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < C; ++c) x[t][c] += mlp[t][c];
    tr.layers.push_back(std::move(lt));
  }
  const Rows hf = normalize(cfg, x, w.normf_w, w.normf_b);
  const Mat& U = w.unembedding();  // (V, C)
  const int V = cfg.vocab_size;
  tr.logits = Tensor{{T, V}, std::vector<float>(static_cast<size_t>(T * V))};
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < V; ++v) {
      double s = 0;
      for (int c = 0; c < C; ++c) s += hf[t][c] * U(v, c);
      tr.logits.data[t * V + v] = static_cast<float>(s);
    }
  return tr;
}

}  // namespace attnviz
