#include "core/engine/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

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

// RMSNorm of columns [c0, c0 + n) of every row, weights w (n), in place (QK-norm).
void rms_slice(Rows& x, int c0, int n, const Vec& w, double eps) {
  for (auto& row : x) {
    double sq = 0;
    for (int c = 0; c < n; ++c) sq += row[c0 + c] * row[c0 + c] / n;
    for (int c = 0; c < n; ++c) row[c0 + c] = row[c0 + c] / std::sqrt(sq + eps) * w(c);
  }
}

// Rotate-half RoPE on the first rot = 2 · inv_freq.size() dims of one head's rows
// (position = row index), frequencies in double, cos and sin times mscale.
void rope(Rows& x, const std::vector<double>& inv_freq, double mscale) {
  const int half = static_cast<int>(inv_freq.size());
  for (size_t t = 0; t < x.size(); ++t)
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(t) * inv_freq[static_cast<size_t>(i)];
      const double a = x[t][i], b = x[t][i + half];
      x[t][i] = (a * std::cos(angle) - b * std::sin(angle)) * mscale;
      x[t][i + half] = (b * std::cos(angle) + a * std::sin(angle)) * mscale;
    }
}

// x[t] += scale · (norm(branch[t]) when the block norms its outputs, else branch[t]).
void add_branch(const ModelConfig& cfg, const Vec& post_norm, const Rows& branch, Rows& x) {
  const Rows b = post_norm.size() ? normalize(cfg, branch, post_norm, Vec()) : branch;
  for (size_t t = 0; t < x.size(); ++t)
    for (size_t c = 0; c < x[t].size(); ++c) x[t][c] += cfg.residual_scale * b[t][c];
}

void store(const Rows& x, Tensor& t, int head) {
  for (size_t i = 0; i < x.size(); ++i)
    for (size_t j = 0; j < x[i].size(); ++j)
      t.data[(static_cast<size_t>(head) * x.size() + i) * x[i].size() + j] = static_cast<float>(x[i][j]);
}

}  // namespace

Trace reference_forward(const Model& m, const std::vector<int>& window, const Ablation& ablation) {
  const ModelConfig& cfg = m.config;
  // Gemma 4's experts are checked against tests/reference/gemma4_parity.py (PyTorch) instead.
  if (cfg.experts.gemma) throw Error("the reference loops do not cover Gemma 4's experts (the 26B-A4B)");
  ModelWeights f32 = m.weights;  // stored matrices decoded: the loops read float32
  f32.to_f32();
  const ModelWeights& w = f32;
  const int T = static_cast<int>(window.size()), C = cfg.n_embd, H = cfg.n_head;
  const double NEG_INF = -std::numeric_limits<double>::infinity();
  check_ablation_source(ablation, T, cfg);
  Trace tr;
  tr.model = m.name;
  tr.backend = "reference";
  tr.block_size = T;
  tr.tokens = window;
  tr.ablation = ablation;

  Rows x = zeros(T, C);
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < C; ++c)
      x[t][c] = w.tok_emb.f32(window[t], c) * static_cast<double>(cfg.emb_scale) + (cfg.arch == Arch::Gpt2 ? w.pos_emb(t, c) : 0.0);

  // Gemma 4's per-layer embeddings (P each): ple[t][l·P + i] = (table[id][l·P + i]·√P +
  // RMSNorm over layer l's P of (e·W_proj)·C^−½)·2^−½, e the token's embedding × emb_scale.
  const int P = cfg.ple_dim, L = cfg.n_layer;
  Rows ple = zeros(T, L * P);
  if (P) {
    const Rows proj = linear_cols(x, w.ple_model_proj.f32, Vec(), 0, L * P);  // x: the scaled embeddings
    for (int t = 0; t < T; ++t)
      for (int l = 0; l < L; ++l) {
        double sq = 0;
        for (int i = 0; i < P; ++i) sq += std::pow(proj[t][l * P + i] / std::sqrt(double(C)), 2) / P;
        for (int i = 0; i < P; ++i) {
          const double normed = proj[t][l * P + i] / std::sqrt(double(C)) / std::sqrt(sq + cfg.norm_eps) * w.ple_norm(i);
          const double table = window[t] < cfg.ple_vocab ? w.ple_table.f32(window[t], l * P + i) : 0.0;
          ple[t][l * P + i] = (table * std::sqrt(double(P)) + normed) * std::sqrt(0.5);
        }
      }
  }
  auto gelu = [](double u) { return 0.5 * u * (1 + std::tanh(std::sqrt(2 / M_PI) * (u + 0.044715 * u * u * u))); };
  // Each layer's K and V per KV head, after their norms and RoPE: Gemma 4's shared layers read them.
  std::vector<std::vector<Rows>> keys(static_cast<size_t>(L)), values(static_cast<size_t>(L));

  for (int l = 0; l < cfg.n_layer; ++l) {
    const LayerWeights& lw = w.layers[l];
    const int KV = cfg.kv_heads_at(l), d = cfg.head_size_at(l);  // Gemma 4's differ by layer
    LayerTrace lt;
    for (Tensor* t : {&lt.q, &lt.out}) *t = Tensor{{H, T, d}, FloatBuf(static_cast<size_t>(H * T * d))};
    for (Tensor* t : {&lt.k, &lt.v}) *t = Tensor{{KV, T, d}, FloatBuf(static_cast<size_t>(KV * T * d))};
    for (Tensor* t : {&lt.scores, &lt.probs}) *t = Tensor{{H, T, T}, FloatBuf(static_cast<size_t>(H * T * T))};
    if (lw.sinks.size()) {
      lt.sinks.assign(lw.sinks.data(), lw.sinks.data() + lw.sinks.size());
      lt.sink = Tensor{{H, T}, FloatBuf(static_cast<size_t>(H * T))};
    }
    const LayerSpec spec = cfg.layer(l);
    switch (spec.mixer) {  // every kind has its case (no default: -Wswitch names a kind left out)
      case Mixer::Softmax: break;
      case Mixer::GatedDeltaNet:
      case Mixer::ShortConv:  // their literal loops are delta_rule.h's and the backends' own
        throw Error("the literal reference runs softmax-attention layers only, and layer " + std::to_string(l) +
                        " of this " + cfg.model_type +
                        " model is not one\n  HINT: compare such a model's layers "
                        "with tests/reference/ (PyTorch) instead.",
                    ErrorKind::Usage);
    }
    lt.scale = spec.scale;  // the trace derives scaled, capped and masked
    lt.softcap = spec.softcap;
    lt.window = spec.window;

    const Rows h = lw.norm1_w.size() ? normalize(cfg, x, lw.norm1_w, lw.norm1_b) : x;
    const bool own_kv = spec.kv_source < 0;  // Gemma 4's shared layers read layer kv_source's K and V
    // All heads' projections, QK-normed over the whole row (OLMo 2) before they are split.
    Rows q_all = linear_cols(h, lw.wq.f32, lw.bq, 0, H * d);
    Rows k_all = own_kv ? linear_cols(h, lw.wk.f32, lw.bk, 0, KV * d) : Rows();
    if (cfg.qk_norm == QkNorm::Whole) {
      rms_slice(q_all, 0, H * d, lw.q_norm, cfg.norm_eps);
      rms_slice(k_all, 0, KV * d, lw.k_norm, cfg.norm_eps);
    }
    Rows concat = zeros(T, H * d);
    keys[static_cast<size_t>(l)].resize(static_cast<size_t>(KV));
    values[static_cast<size_t>(l)].resize(static_cast<size_t>(KV));
    for (int head = 0; head < H; ++head) {
      const int g = head / (H / KV);  // the KV head this query head reads
      Rows q = zeros(T, d), k = zeros(T, d), v;
      for (int t = 0; t < T; ++t)
        for (int e = 0; e < d; ++e) q[t][e] = q_all[t][head * d + e];
      if (cfg.qk_norm == QkNorm::PerHead) rms_slice(q, 0, d, lw.q_norm, cfg.norm_eps);
      if (spec.rope) rope(q, rope_inv_freq(cfg, l, T), spec.rope_scaling.mscale);
      if (!own_kv) {
        k = keys[static_cast<size_t>(spec.kv_source)][static_cast<size_t>(g)];
        v = values[static_cast<size_t>(spec.kv_source)][static_cast<size_t>(g)];
      } else {
        for (int t = 0; t < T; ++t)
          for (int e = 0; e < d; ++e) k[t][e] = k_all[t][g * d + e];
        // Gemma 4's V = K: the raw key projection, before k_norm and RoPE
        v = spec.v_from_k ? k : linear_cols(h, lw.wv.f32, lw.bv, g * d, d);  // (T, d)
        if (cfg.v_norm) rms_slice(v, 0, d, Vec::Ones(d), cfg.norm_eps);     // without a weight
        if (cfg.qk_norm == QkNorm::PerHead) rms_slice(k, 0, d, lw.k_norm, cfg.norm_eps);
        if (spec.rope) rope(k, rope_inv_freq(cfg, l, T), spec.rope_scaling.mscale);
        keys[static_cast<size_t>(l)][static_cast<size_t>(g)] = k;
        values[static_cast<size_t>(l)][static_cast<size_t>(g)] = v;
      }
      for (int t = 0; t < T; ++t)  // Ministral 3's query temperature (1 before its length)
        for (int e = 0; e < d; ++e) q[t][e] *= cfg.query_temperature(t);
      Rows wei = zeros(T, T), scaled = zeros(T, T), masked = zeros(T, T), probs = zeros(T, T), out = zeros(T, d);
      const double c = spec.softcap;
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j) {
          for (int e = 0; e < d; ++e) wei[i][j] += q[i][e] * k[j][e];  // q @ k.T
          scaled[i][j] = wei[i][j] * spec.scale;                          // / sqrt(d), or the model's scale
          const double capped = c > 0 ? c * std::tanh(scaled[i][j] / c) : scaled[i][j];  // soft-cap
          const bool outside = j > i || (spec.window > 0 && j <= i - spec.window);  // causal; window [i-W+1, i]
          masked[i][j] = outside ? NEG_INF : capped;                                  // masked_fill(-inf)
        }
      const bool sink = lw.sinks.size() > 0;  // GPT-OSS: one more column, the head's sink logit, dropped after
      const double sink_logit = sink ? lw.sinks(head) : NEG_INF;
      for (int i = 0; i < T; ++i) {  // softmax over each row
        double mx = sink_logit, sum = 0;
        for (int j = 0; j < T; ++j) mx = std::max(mx, masked[i][j]);
        for (int j = 0; j < T; ++j) sum += std::exp(masked[i][j] - mx);
        if (sink) sum += std::exp(sink_logit - mx);
        for (int j = 0; j < T; ++j) probs[i][j] = std::exp(masked[i][j] - mx) / sum;
        if (sink) lt.sink.data[static_cast<size_t>(head * T + i)] = static_cast<float>(std::exp(sink_logit - mx) / sum);
      }
      for (int i = 0; i < T; ++i)  // wei @ v
        for (int e = 0; e < d; ++e)
          for (int j = 0; j < T; ++j) out[i][e] += probs[i][j] * v[j][e];
      if (ablation.has(l, head)) {  // the head switched off: its output replaced
        std::vector<double> mean(static_cast<size_t>(d), 0.0);
        for (int t = 0; t < T; ++t)
          for (int e = 0; e < d; ++e) mean[e] += out[t][e] / T;
        for (int t = 0; t < T; ++t)
          for (int e = 0; e < d; ++e)
            out[t][e] = ablation.source ? ablation.source->head(l, head)[t * d + e]  // patched in from another run
                        : ablation.mode == AblationMode::Mean ? mean[e]
                                                              : 0.0;
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
    add_branch(cfg, lw.post_attn_norm, linear_cols(concat, lw.wo.f32, lw.bo, 0, C), x);  // output projection

    const Rows h2 = lw.norm2_w.size() ? normalize(cfg, x, lw.norm2_w, lw.norm2_b) : x;
    const int I = cfg.inner_at(l);
    if (cfg.experts.count) {  // GPT-OSS: router → top k → softmax over the k → weighted experts
      const int E = cfg.experts.count, K = cfg.experts.top_k;
      const Rows logits = linear_cols(h2, lw.router.f32, lw.router_b, 0, E);
      for (Tensor* t : {&lt.experts, &lt.expert_weights}) *t = Tensor{{T, K}, FloatBuf(static_cast<size_t>(T * K))};
      lt.router = Tensor{{T, E}, FloatBuf(static_cast<size_t>(T * E))};
      Rows moe = zeros(T, C);
      for (int t = 0; t < T; ++t) {
        std::vector<bool> taken(static_cast<size_t>(E), false);
        std::vector<int> chosen;
        for (int k = 0; k < K; ++k) {  // the largest logit not yet taken (the lower index on a tie)
          int best = -1;
          for (int e = 0; e < E; ++e)
            if (!taken[e] && (best < 0 || logits[t][e] > logits[t][best])) best = e;
          taken[best] = true;
          chosen.push_back(best);
        }
        double z = 0;
        for (int e : chosen) z += std::exp(logits[t][e] - logits[t][chosen[0]]);
        for (int k = 0; k < K; ++k) {
          const int e = chosen[k];
          const double wgt = std::exp(logits[t][e] - logits[t][chosen[0]]) / z;
          lt.experts.data[t * K + k] = static_cast<float>(e);
          lt.expert_weights.data[t * K + k] = static_cast<float>(wgt);
          std::vector<double> act(static_cast<size_t>(I));
          const Mat& Wg = lw.ex_gate[static_cast<size_t>(e)].f32;  // (C, I)
          const Mat& Wu = lw.ex_up[static_cast<size_t>(e)].f32;    // (C, I)
          const Mat& Wd = lw.ex_down[static_cast<size_t>(e)].f32;  // (I, C)
          for (int i = 0; i < I; ++i) {
            double gate = lw.ex_gate_b[e * I + i], up = lw.ex_up_b[e * I + i];
            for (int c = 0; c < C; ++c) {
              gate += h2[t][c] * Wg(c, i);
              up += h2[t][c] * Wu(c, i);
            }
            gate = std::min<double>(gate, cfg.experts.limit);
            up = std::clamp<double>(up, -cfg.experts.limit, cfg.experts.limit);
            act[i] = (up + 1) * gate / (1 + std::exp(-cfg.experts.alpha * gate));
          }
          for (int c = 0; c < C; ++c) {
            double y = lw.ex_down_b[e * C + c];
            for (int i = 0; i < I; ++i) y += act[i] * Wd(i, c);
            moe[t][c] += wgt * y;
          }
        }
        for (int e = 0; e < E; ++e) lt.router.data[t * E + e] = static_cast<float>(logits[t][e]);
      }
      add_branch(cfg, lw.post_mlp_norm, moe, x);
      tr.layers.push_back(std::move(lt));
      continue;
    }
    Rows a = linear_cols(h2, lw.w_fc.f32, lw.b_fc, 0, I);
    if (cfg.arch == Arch::Gpt2) {
      for (auto& row : a)
        for (double& u : row) u = gelu(u);
    } else {
      const Rows up = linear_cols(h2, lw.w_up.f32, Vec(), 0, I);
      const bool geglu = cfg.mlp == MlpKind::GeGLU;
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < I; ++i) a[t][i] = (geglu ? gelu(a[t][i]) : a[t][i] / (1 + std::exp(-a[t][i]))) * up[t][i];
    }
    add_branch(cfg, lw.post_mlp_norm, linear_cols(a, lw.w_down.f32, lw.b_down, 0, C), x);
    if (P) {  // Gemma 4: x += RMSNorm(W_proj · (gelu_tanh(x · W_gate) ⊙ ple[l]))
      Rows g = linear_cols(x, lw.ple_gate.f32, Vec(), 0, P);
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < P; ++i) g[t][i] = gelu(g[t][i]) * ple[t][l * P + i];
      add_branch(cfg, lw.ple_post_norm, linear_cols(g, lw.ple_proj.f32, Vec(), 0, C), x);
    }
    for (auto& row : x)  // Gemma 4's layer_scalar (1 elsewhere): the whole stream
      for (double& u : row) u *= lw.layer_scalar;
    tr.layers.push_back(std::move(lt));
  }
  const Rows hf = normalize(cfg, x, w.normf_w, w.normf_b);
  const Mat& U = w.unembedding().f32;  // (V, C)
  const int V = cfg.vocab_size;
  tr.logits = Tensor{{T, V}, FloatBuf(static_cast<size_t>(T * V))};
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < V; ++v) {
      double s = 0;
      for (int c = 0; c < C; ++c) s += hf[t][c] * U(v, c);
      s *= cfg.logit_scale;  // Granite: / logits_scaling
      if (cfg.final_softcap > 0) s = cfg.final_softcap * std::tanh(s / cfg.final_softcap);
      tr.logits.data[t * V + v] = static_cast<float>(s);
    }
  return tr;
}

}  // namespace attnviz
