#include "core/train/backward.h"

#include <cmath>
#include <random>

#include "core/error.h"

namespace attnviz {

// ---------------------------------------------------------------------------------------
// Parameters

template <class S>
std::vector<ParamRef<S>> param_list(Params<S>& p) {
  std::vector<ParamRef<S>> out;
  auto add = [&](const std::string& name, auto& t, bool decay) {
    if (t.size()) out.push_back({name, t.data(), t.size(), decay});
  };
  add("tok_emb", p.tok_emb, false);
  add("pos_emb", p.pos_emb, false);
  for (size_t l = 0; l < p.layers.size(); ++l) {
    auto& lp = p.layers[l];
    const std::string pre = "layers." + std::to_string(l) + ".";
    // Matrices of linear layers decay; norms and biases do not.
#define X(f) add(pre + #f, lp.f, std::is_same<decltype(lp.f), MatT<S>>::value);
    ATTNVIZ_LAYER_FIELDS(X)
#undef X
  }
  add("normf_w", p.normf_w, false);
  add("normf_b", p.normf_b, false);
  add("lm_head", p.lm_head, true);
  return out;
}

template <class S>
Params<S> zeros_like(const Params<S>& p) {
  Params<S> z = p;
  for (auto& r : param_list(z)) std::fill(r.data, r.data + r.size, S(0));
  return z;
}

// A layer field as a dense float32 array: a Vec as it is, a Weight's float32 matrix
// (params_from_weights decodes stored ones first).
const Vec& dense(const Vec& v) { return v; }
const Mat& dense(const Weight& w) { return w.f32; }

template <class S>
Params<S> params_from_weights(const ModelWeights& w) {
  if (w.any_stored()) {  // the trainer updates float32 weights in place
    ModelWeights f = w;
    f.to_f32();
    return params_from_weights<S>(f);
  }
  Params<S> p;
  p.tok_emb = w.tok_emb.f32.cast<S>();
  p.pos_emb = w.pos_emb.cast<S>();
  for (const auto& lw : w.layers) {
    LayerParams<S> lp;
#define X(f) lp.f = dense(lw.f).template cast<S>();
    ATTNVIZ_LAYER_FIELDS(X)
#undef X
    p.layers.push_back(std::move(lp));
  }
  p.normf_w = w.normf_w.cast<S>();
  p.normf_b = w.normf_b.cast<S>();
  p.lm_head = w.lm_head.f32.cast<S>();
  return p;
}

ModelWeights weights_from_params(const Params<float>& p) {
  ModelWeights w;
  w.tok_emb = p.tok_emb;
  w.pos_emb = p.pos_emb;
  for (const auto& lp : p.layers) {
    LayerWeights lw;
#define X(f) lw.f = lp.f;
    ATTNVIZ_LAYER_FIELDS(X)
#undef X
    w.layers.push_back(std::move(lw));
  }
  w.normf_w = p.normf_w;
  w.normf_b = p.normf_b;
  w.lm_head = p.lm_head;
  return w;
}

Params<float> init_params(const ModelConfig& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto normal = [&](int rows, int cols, float std) {
    std::normal_distribution<float> dist(0.f, std);
    MatT<float> m(rows, cols);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = dist(rng);
    return m;
  };
  auto ones = [](int n) { return VecT<float>::Ones(n); };
  auto zeros = [](int n) { return VecT<float>::Zero(n); };
  const int C = c.n_embd, I = c.n_inner, Hd = c.n_head * c.head_size, KVd = c.n_kv_head * c.head_size;
  const float s = 0.02f, s_res = 0.02f / std::sqrt(2.f * static_cast<float>(c.n_layer));
  const bool gpt2 = c.arch == Arch::Gpt2;
  Params<float> p;
  p.tok_emb = normal(c.vocab_size, C, s);
  if (gpt2) p.pos_emb = normal(c.n_ctx, C, s);
  for (int l = 0; l < c.n_layer; ++l) {
    LayerParams<float> lp;
    lp.norm1_w = ones(C);
    if (gpt2) lp.norm1_b = zeros(C);
    lp.wq = normal(C, Hd, s);
    lp.wk = normal(C, KVd, s);
    lp.wv = normal(C, KVd, s);
    if (c.qkv_bias) lp.bq = zeros(Hd), lp.bk = zeros(KVd), lp.bv = zeros(KVd);
    lp.wo = normal(Hd, C, s_res);
    if (c.o_bias) lp.bo = zeros(C);
    lp.norm2_w = ones(C);
    if (gpt2) lp.norm2_b = zeros(C);
    lp.w_fc = normal(C, I, s);
    if (c.mlp_bias) lp.b_fc = zeros(I);
    if (!gpt2) lp.w_up = normal(C, I, s);
    lp.w_down = normal(I, C, s_res);
    if (c.mlp_bias) lp.b_down = zeros(C);
    p.layers.push_back(std::move(lp));
  }
  p.normf_w = ones(C);
  if (gpt2) p.normf_b = zeros(C);
  if (!c.tie_embeddings) p.lm_head = normal(c.vocab_size, C, s);
  return p;
}

// ---------------------------------------------------------------------------------------
// Ops

template <class S>
void layer_norm_fwd(const MatT<S>& x, const VecT<S>& w, const VecT<S>& b, S eps, MatT<S>& y, ColT<S>& mean,
                    ColT<S>& rstd) {
  const Eigen::Index N = x.rows();
  y.resize(N, x.cols());
  mean.resize(N);
  rstd.resize(N);
  for (Eigen::Index r = 0; r < N; ++r) {
    const S mu = x.row(r).mean();
    const S var = (x.row(r).array() - mu).square().mean();
    const S inv = S(1) / std::sqrt(var + eps);
    mean(r) = mu;
    rstd(r) = inv;
    y.row(r) = ((x.row(r).array() - mu) * inv * w.array() + b.array()).matrix();
  }
}

template <class S>
void layer_norm_bwd(const MatT<S>& dy, const MatT<S>& x, const VecT<S>& w, const ColT<S>& mean, const ColT<S>& rstd,
                    MatT<S>& dx, VecT<S>& dw, VecT<S>& db) {
  const Eigen::Index N = x.rows(), C = x.cols();
  dx.resize(N, C);
  VecT<S> xhat(C), g(C);
  for (Eigen::Index r = 0; r < N; ++r) {
    xhat = (x.row(r).array() - mean(r)) * rstd(r);
    g = dy.row(r).cwiseProduct(w);  // ∂L/∂xhat
    const S mg = g.mean(), mgx = g.cwiseProduct(xhat).mean();
    dx.row(r) = rstd(r) * (g.array() - mg - xhat.array() * mgx).matrix();
    dw += dy.row(r).cwiseProduct(xhat);
    db += dy.row(r);
  }
}

template <class S>
void rms_norm_fwd(const MatT<S>& x, const VecT<S>& w, S eps, MatT<S>& y, ColT<S>& rstd) {
  const Eigen::Index N = x.rows();
  y.resize(N, x.cols());
  rstd.resize(N);
  for (Eigen::Index r = 0; r < N; ++r) {
    const S inv = S(1) / std::sqrt(x.row(r).squaredNorm() / static_cast<S>(x.cols()) + eps);
    rstd(r) = inv;
    y.row(r) = (x.row(r).array() * inv * w.array()).matrix();
  }
}

template <class S>
void rms_norm_bwd(const MatT<S>& dy, const MatT<S>& x, const VecT<S>& w, const ColT<S>& rstd, MatT<S>& dx,
                  VecT<S>& dw) {
  const Eigen::Index N = x.rows(), C = x.cols();
  dx.resize(N, C);
  VecT<S> xhat(C), g(C);
  for (Eigen::Index r = 0; r < N; ++r) {
    xhat = x.row(r) * rstd(r);
    g = dy.row(r).cwiseProduct(w);
    const S mgx = g.cwiseProduct(xhat).mean();
    dx.row(r) = rstd(r) * (g.array() - xhat.array() * mgx).matrix();
    dw += dy.row(r).cwiseProduct(xhat);
  }
}

template <class S>
void linear_fwd(const MatT<S>& x, const MatT<S>& w, const VecT<S>& b, MatT<S>& y) {
  y.noalias() = x * w;
  if (b.size()) y.rowwise() += b;
}

template <class S>
void linear_bwd(const MatT<S>& dy, const MatT<S>& x, const MatT<S>& w, MatT<S>* dx, bool dx_add, MatT<S>& dw,
                VecT<S>* db) {
  if (dx) {
    if (dx_add) dx->noalias() += dy * w.transpose();
    else dx->noalias() = dy * w.transpose();
  }
  dw.noalias() += x.transpose() * dy;
  if (db && db->size()) *db += dy.colwise().sum();
}

namespace {
template <class S>
S gelu_k() {
  return static_cast<S>(std::sqrt(2.0 / M_PI));
}
}  // namespace

template <class S>
void gelu_fwd(const MatT<S>& x, MatT<S>& y) {
  const S k = gelu_k<S>(), a = S(0.044715), half = S(0.5), one = S(1);
  y = x.unaryExpr([=](S v) { return half * v * (one + std::tanh(k * (v + a * v * v * v))); });
}

template <class S>
void gelu_bwd(const MatT<S>& dy, const MatT<S>& x, MatT<S>& dx) {
  const S k = gelu_k<S>(), a = S(0.044715), half = S(0.5), one = S(1), three = S(3);
  dx = x.binaryExpr(dy, [=](S v, S g) {
    const S t = std::tanh(k * (v + a * v * v * v));
    return g * (half * (one + t) + half * v * (one - t * t) * k * (one + three * a * v * v));
  });
}

template <class S>
void swiglu_fwd(const MatT<S>& gate, const MatT<S>& up, MatT<S>& y) {
  y = gate.binaryExpr(up, [](S g, S u) { return g / (S(1) + std::exp(-g)) * u; });
}

template <class S>
void swiglu_bwd(const MatT<S>& dy, const MatT<S>& gate, const MatT<S>& up, MatT<S>& dgate, MatT<S>& dup) {
  dgate.resize(gate.rows(), gate.cols());
  dup.resize(gate.rows(), gate.cols());
  for (Eigen::Index i = 0; i < gate.size(); ++i) {
    const S g = gate.data()[i], u = up.data()[i], sig = S(1) / (S(1) + std::exp(-g));
    dup.data()[i] = dy.data()[i] * g * sig;
    dgate.data()[i] = dy.data()[i] * u * sig * (S(1) + g * (S(1) - sig));
  }
}

template <class S>
void rope_rows(MatT<S>& x, int heads, int d, int T, const std::vector<double>& inv_freq_d, bool inverse) {
  const int half = d / 2;
  // The same frequencies and angles as core/engine/ops.cpp rope_inplace (in double for S=double).
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    const double f = inv_freq_d[static_cast<size_t>(i)];
    inv_freq[i] = std::is_same<S, float>::value ? static_cast<double>(static_cast<float>(f)) : f;
  }
  std::vector<S> cs(static_cast<size_t>(T) * half), sn(static_cast<size_t>(T) * half);
  for (int pos = 0; pos < T; ++pos)
    for (int i = 0; i < half; ++i) {
      const double a = static_cast<double>(pos) * inv_freq[i];
      cs[pos * half + i] = static_cast<S>(std::cos(a));
      sn[pos * half + i] = static_cast<S>(inverse ? -std::sin(a) : std::sin(a));
    }
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const int pos = static_cast<int>(r % T);
    for (int h = 0; h < heads; ++h) {
      S* p = &x(r, h * d);
      for (int i = 0; i < half; ++i) {
        const S c = cs[pos * half + i], s = sn[pos * half + i], x1 = p[i], x2 = p[i + half];
        p[i] = x1 * c - x2 * s;
        p[i + half] = x2 * c + x1 * s;
      }
    }
  }
}

template <class S>
void attention_fwd(const MatT<S>& q, const MatT<S>& k, const MatT<S>& v, int B, int T, int H, int KV, int d,
                   MatT<S>& att, std::vector<S>& probs) {
  const int group = H / KV;
  const S scale = S(1) / std::sqrt(static_cast<S>(d));
  att.resize(static_cast<Eigen::Index>(B) * T, static_cast<Eigen::Index>(H) * d);
  probs.assign(static_cast<size_t>(B) * H * T * T, S(0));
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * H; ++bh) {
    const int b = bh / H, h = bh % H, g = h / group;
    Eigen::Map<MatT<S>> P(probs.data() + static_cast<size_t>(bh) * T * T, T, T);
    const MatT<S> Sc = (q.block(b * T, h * d, T, d) * k.block(b * T, g * d, T, d).transpose()) * scale;  // (T, T)
    for (int i = 0; i < T; ++i) {
      const S mx = Sc.row(i).head(i + 1).maxCoeff();
      S sum = 0;
      for (int j = 0; j <= i; ++j) sum += (P(i, j) = std::exp(Sc(i, j) - mx));
      P.row(i).head(i + 1) /= sum;
    }
    att.block(b * T, h * d, T, d).noalias() = P * v.block(b * T, g * d, T, d);
  }
}

template <class S>
void attention_bwd(const MatT<S>& datt, const MatT<S>& q, const MatT<S>& k, const MatT<S>& v,
                   const std::vector<S>& probs, int B, int T, int H, int KV, int d, MatT<S>& dq, MatT<S>& dk,
                   MatT<S>& dv) {
  const int group = H / KV;
  const S scale = S(1) / std::sqrt(static_cast<S>(d));
  dq.resize(q.rows(), q.cols());
  dk.setZero(k.rows(), k.cols());
  dv.setZero(v.rows(), v.cols());
  // One task per (sequence, KV head): it owns that KV head's dk/dv rows, so summing over the
  // query group needs no locks.
#pragma omp parallel for schedule(static)
  for (int bg = 0; bg < B * KV; ++bg) {
    const int b = bg / KV, g = bg % KV;
    const auto K = k.block(b * T, g * d, T, d);
    const auto V = v.block(b * T, g * d, T, d);
    MatT<S> dP(T, T), dS(T, T);
    for (int h = g * group; h < (g + 1) * group; ++h) {
      Eigen::Map<const MatT<S>> P(probs.data() + (static_cast<size_t>(b) * H + h) * T * T, T, T);
      const auto dO = datt.block(b * T, h * d, T, d);
      dP.noalias() = dO * V.transpose();                        // (T, T)
      dv.block(b * T, g * d, T, d).noalias() += P.transpose() * dO;
      for (int i = 0; i < T; ++i) {                             // softmax backward, row by row
        const S dot = P.row(i).head(i + 1).dot(dP.row(i).head(i + 1));
        dS.row(i) = (P.row(i).array() * (dP.row(i).array() - dot)).matrix() * scale;  // 0 where masked (P = 0)
      }
      dq.block(b * T, h * d, T, d).noalias() = dS * K;
      dk.block(b * T, g * d, T, d).noalias() += dS.transpose() * q.block(b * T, h * d, T, d);
    }
  }
}

template <class S>
S cross_entropy(const MatT<S>& logits, const std::vector<int>& targets, MatT<S>* dlogits) {
  const Eigen::Index N = logits.rows(), V = logits.cols();
  std::vector<S> row_loss(static_cast<size_t>(N));
  if (dlogits) dlogits->resize(N, V);
  const S invN = S(1) / static_cast<S>(N);
#pragma omp parallel for schedule(static)
  for (Eigen::Index r = 0; r < N; ++r) {
    const S mx = logits.row(r).maxCoeff();
    const S sum = (logits.row(r).array() - mx).exp().sum();
    const S lse = mx + std::log(sum);
    const int t = targets[r];
    row_loss[r] = lse - logits(r, t);
    if (dlogits) {
      dlogits->row(r) = ((logits.row(r).array() - lse).exp() * invN).matrix();
      (*dlogits)(r, t) -= invN;
    }
  }
  S total = 0;
  for (S l : row_loss) total += l;
  return total * invN;
}

// ---------------------------------------------------------------------------------------
// The model

template <class S>
S model_loss(const ModelConfig& c, const Params<S>& p, const std::vector<int>& inputs, const std::vector<int>& targets,
             int B, int T, Params<S>* grads, Activations<S>& A) {
  const int N = B * T, C = c.n_embd, H = c.n_head, KV = c.n_kv_head, d = c.head_size, V = c.vocab_size;
  const bool gpt2 = c.arch == Arch::Gpt2;
  const S eps = static_cast<S>(c.norm_eps);
  if (static_cast<int>(inputs.size()) != N || static_cast<int>(targets.size()) != N)
    throw Error("model_loss: inputs/targets must hold B*T ids");
  if (gpt2 && T > p.pos_emb.rows()) throw Error("model_loss: T is longer than the model's context");
  for (int r = 0; r < N; ++r)
    if (inputs[r] < 0 || inputs[r] >= V || targets[r] < 0 || targets[r] >= V)
      throw Error("model_loss: token id out of range at row " + std::to_string(r));
  const MatT<S>& E = p.lm_head.size() ? p.lm_head : p.tok_emb;  // (V, C) unembedding
  A.layers.resize(c.n_layer);

  // ---- forward
  MatT<S> x(N, C), y;
  for (int r = 0; r < N; ++r) {
    x.row(r) = p.tok_emb.row(inputs[r]);
    if (gpt2) x.row(r) += p.pos_emb.row(r % T);
  }
  for (int l = 0; l < c.n_layer; ++l) {
    const LayerParams<S>& lp = p.layers[l];
    LayerActs<S>& a = A.layers[l];
    a.x = x;
    if (gpt2) layer_norm_fwd(a.x, lp.norm1_w, lp.norm1_b, eps, a.h1, a.mean1, a.rstd1);
    else rms_norm_fwd(a.x, lp.norm1_w, eps, a.h1, a.rstd1);
    linear_fwd(a.h1, lp.wq, lp.bq, a.q);
    linear_fwd(a.h1, lp.wk, lp.bk, a.k);
    linear_fwd(a.h1, lp.wv, lp.bv, a.v);
    if (!gpt2) {
      rope_rows(a.q, H, d, T, rope_inv_freq(c), false);
      rope_rows(a.k, KV, d, T, rope_inv_freq(c), false);
    }
    attention_fwd(a.q, a.k, a.v, B, T, H, KV, d, a.att, a.probs);
    linear_fwd(a.att, lp.wo, lp.bo, y);
    a.x2 = a.x + y;
    if (gpt2) layer_norm_fwd(a.x2, lp.norm2_w, lp.norm2_b, eps, a.h2, a.mean2, a.rstd2);
    else rms_norm_fwd(a.x2, lp.norm2_w, eps, a.h2, a.rstd2);
    linear_fwd(a.h2, lp.w_fc, lp.b_fc, a.fc);
    if (gpt2) {
      gelu_fwd(a.fc, a.act);
    } else {
      linear_fwd(a.h2, lp.w_up, VecT<S>(), a.up);
      swiglu_fwd(a.fc, a.up, a.act);
    }
    linear_fwd(a.act, lp.w_down, lp.b_down, y);
    x = a.x2 + y;
  }
  A.xf = x;
  if (gpt2) layer_norm_fwd(A.xf, p.normf_w, p.normf_b, eps, A.hf, A.meanf, A.rstdf);
  else rms_norm_fwd(A.xf, p.normf_w, eps, A.hf, A.rstdf);
  A.logits.noalias() = A.hf * E.transpose();  // (N, V)
  MatT<S> dlogits;
  const S loss = cross_entropy(A.logits, targets, grads ? &dlogits : nullptr);
  if (!grads) return loss;

  // ---- backward
  Params<S>& G = *grads;
  MatT<S>& dE = p.lm_head.size() ? G.lm_head : G.tok_emb;
  MatT<S> dh = dlogits * E;                   // (N, C)
  dE.noalias() += dlogits.transpose() * A.hf;  // (V, C)
  MatT<S> dx;
  if (gpt2) layer_norm_bwd(dh, A.xf, p.normf_w, A.meanf, A.rstdf, dx, G.normf_w, G.normf_b);
  else rms_norm_bwd(dh, A.xf, p.normf_w, A.rstdf, dx, G.normf_w);
  MatT<S> dact, dfc, dup, dh2, dx2, datt, dq, dk, dv, dh1, tmp;
  for (int l = c.n_layer - 1; l >= 0; --l) {
    const LayerParams<S>& lp = p.layers[l];
    LayerParams<S>& lg = G.layers[l];
    const LayerActs<S>& a = A.layers[l];
    // x_out = x2 + act·W_down + b_down
    linear_bwd(dx, a.act, lp.w_down, &dact, false, lg.w_down, &lg.b_down);
    if (gpt2) {
      gelu_bwd(dact, a.fc, dfc);
      linear_bwd(dfc, a.h2, lp.w_fc, &dh2, false, lg.w_fc, &lg.b_fc);
    } else {
      swiglu_bwd(dact, a.fc, a.up, dfc, dup);
      linear_bwd(dfc, a.h2, lp.w_fc, &dh2, false, lg.w_fc, &lg.b_fc);
      linear_bwd(dup, a.h2, lp.w_up, &dh2, true, lg.w_up, static_cast<VecT<S>*>(nullptr));
    }
    if (gpt2) layer_norm_bwd(dh2, a.x2, lp.norm2_w, a.mean2, a.rstd2, tmp, lg.norm2_w, lg.norm2_b);
    else rms_norm_bwd(dh2, a.x2, lp.norm2_w, a.rstd2, tmp, lg.norm2_w);
    dx2 = dx + tmp;
    // x2 = x + att·W_o + b_o
    linear_bwd(dx2, a.att, lp.wo, &datt, false, lg.wo, &lg.bo);
    attention_bwd(datt, a.q, a.k, a.v, a.probs, B, T, H, KV, d, dq, dk, dv);
    if (!gpt2) {
      rope_rows(dq, H, d, T, rope_inv_freq(c), true);
      rope_rows(dk, KV, d, T, rope_inv_freq(c), true);
    }
    linear_bwd(dq, a.h1, lp.wq, &dh1, false, lg.wq, &lg.bq);
    linear_bwd(dk, a.h1, lp.wk, &dh1, true, lg.wk, &lg.bk);
    linear_bwd(dv, a.h1, lp.wv, &dh1, true, lg.wv, &lg.bv);
    if (gpt2) layer_norm_bwd(dh1, a.x, lp.norm1_w, a.mean1, a.rstd1, tmp, lg.norm1_w, lg.norm1_b);
    else rms_norm_bwd(dh1, a.x, lp.norm1_w, a.rstd1, tmp, lg.norm1_w);
    dx = dx2 + tmp;
  }
  for (int r = 0; r < N; ++r) {
    G.tok_emb.row(inputs[r]) += dx.row(r);
    if (gpt2) G.pos_emb.row(r % T) += dx.row(r);
  }
  return loss;
}

// ---------------------------------------------------------------------------------------
// Instantiations

#define ATTNVIZ_INSTANTIATE(S)                                                                                      \
  template std::vector<ParamRef<S>> param_list(Params<S>&);                                                         \
  template Params<S> zeros_like(const Params<S>&);                                                                  \
  template Params<S> params_from_weights<S>(const ModelWeights&);                                                   \
  template void layer_norm_fwd(const MatT<S>&, const VecT<S>&, const VecT<S>&, S, MatT<S>&, ColT<S>&, ColT<S>&);    \
  template void layer_norm_bwd(const MatT<S>&, const MatT<S>&, const VecT<S>&, const ColT<S>&, const ColT<S>&,      \
                               MatT<S>&, VecT<S>&, VecT<S>&);                                                       \
  template void rms_norm_fwd(const MatT<S>&, const VecT<S>&, S, MatT<S>&, ColT<S>&);                                \
  template void rms_norm_bwd(const MatT<S>&, const MatT<S>&, const VecT<S>&, const ColT<S>&, MatT<S>&, VecT<S>&);   \
  template void linear_fwd(const MatT<S>&, const MatT<S>&, const VecT<S>&, MatT<S>&);                               \
  template void linear_bwd(const MatT<S>&, const MatT<S>&, const MatT<S>&, MatT<S>*, bool, MatT<S>&, VecT<S>*);     \
  template void gelu_fwd(const MatT<S>&, MatT<S>&);                                                                 \
  template void gelu_bwd(const MatT<S>&, const MatT<S>&, MatT<S>&);                                                 \
  template void swiglu_fwd(const MatT<S>&, const MatT<S>&, MatT<S>&);                                               \
  template void swiglu_bwd(const MatT<S>&, const MatT<S>&, const MatT<S>&, MatT<S>&, MatT<S>&);                     \
  template void rope_rows(MatT<S>&, int, int, int, const std::vector<double>&, bool);                                                    \
  template void attention_fwd(const MatT<S>&, const MatT<S>&, const MatT<S>&, int, int, int, int, int, MatT<S>&,    \
                              std::vector<S>&);                                                                     \
  template void attention_bwd(const MatT<S>&, const MatT<S>&, const MatT<S>&, const MatT<S>&,                       \
                              const std::vector<S>&, int, int, int, int, int, MatT<S>&, MatT<S>&, MatT<S>&);        \
  template S cross_entropy(const MatT<S>&, const std::vector<int>&, MatT<S>*);                                      \
  template S model_loss(const ModelConfig&, const Params<S>&, const std::vector<int>&, const std::vector<int>&, int, \
                        int, Params<S>*, Activations<S>&);

ATTNVIZ_INSTANTIATE(float)
ATTNVIZ_INSTANTIATE(double)

}  // namespace attnviz
