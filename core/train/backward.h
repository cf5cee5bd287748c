// Training maths: every op's forward and backward pass, and the whole model's loss with its
// gradient. Templated on the scalar so the trainer runs in float and the gradient checks
// run the very same code in double (explicitly instantiated for float and double).
//
// Dimension letters as in core/model/config.h, plus:
//   B sequences in a batch, T tokens per sequence (≤ block_size), N = B·T rows.
// Matrices are row-major and a linear layer is y = x · W + b with W (in, out), exactly as
// core/model/model.h stores them, so Params<float> converts to ModelWeights field by field.
// Backward functions ACCUMULATE (+=) into parameter gradients; input gradients are
// written (=) unless the name says add.
#pragma once
#include <Eigen/Core>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/model/model.h"

namespace attnviz {

template <class S>
using MatT = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class S>
using VecT = Eigen::Matrix<S, 1, Eigen::Dynamic, Eigen::RowMajor>;  // row vector
template <class S>
using ColT = Eigen::Matrix<S, Eigen::Dynamic, 1>;  // one value per row

// The fields of one layer, in a fixed order (used to visit, convert and save parameters).
#define ATTNVIZ_LAYER_FIELDS(X)                                                                                \
  X(norm1_w) X(norm1_b) X(wq) X(wk) X(wv) X(bq) X(bk) X(bv) X(wo) X(bo) X(norm2_w) X(norm2_b) X(w_fc) X(b_fc) \
      X(w_up) X(w_down) X(b_down)

// Same fields and shapes as LayerWeights / ModelWeights (core/model/model.h); empty = absent.
template <class S>
struct LayerParams {
  VecT<S> norm1_w, norm1_b;  // (C), (C) or empty (RMSNorm)
  MatT<S> wq, wk, wv;        // (C, H*d), (C, KV*d), (C, KV*d)
  VecT<S> bq, bk, bv;        // (H*d), (KV*d), (KV*d) or empty
  MatT<S> wo;                // (H*d, C)
  VecT<S> bo;                // (C) or empty
  VecT<S> norm2_w, norm2_b;  // (C)
  MatT<S> w_fc;              // (C, I) gpt2 c_fc / llama gate
  VecT<S> b_fc;              // (I) or empty
  MatT<S> w_up;              // (C, I) llama up; empty for gpt2
  MatT<S> w_down;            // (I, C)
  VecT<S> b_down;            // (C) or empty
};

template <class S>
struct Params {
  MatT<S> tok_emb;  // (V, C)
  MatT<S> pos_emb;  // (n_ctx, C) gpt2 only
  std::vector<LayerParams<S>> layers;  // (L)
  VecT<S> normf_w, normf_b;  // (C), (C) or empty
  MatT<S> lm_head;           // (V, C), empty when tied to tok_emb
};

// One parameter tensor seen as a flat array: its name ("layers.0.wq", "tok_emb", ...),
// data, size, and whether AdamW decays it (matrices of linear layers only).
template <class S>
struct ParamRef {
  std::string name;
  S* data;
  Eigen::Index size;
  bool decay;
};
// Every non-empty tensor of `p`, always in the same order.
template <class S>
std::vector<ParamRef<S>> param_list(Params<S>& p);

// Same shapes, all zero.
template <class S>
Params<S> zeros_like(const Params<S>& p);

template <class S>
Params<S> params_from_weights(const ModelWeights& w);
ModelWeights weights_from_params(const Params<float>& p);

// Fresh parameters for `c` (GPT-2 style init: N(0, 0.02), residual projections scaled by
// 1/√(2L), norms 1, biases 0), from `seed`.
Params<float> init_params(const ModelConfig& c, uint64_t seed);

// ---------------------------------------------------------------------------------------
// Ops. x, y, dx, dy are (N, width).

template <class S>
void layer_norm_fwd(const MatT<S>& x, const VecT<S>& w, const VecT<S>& b, S eps, MatT<S>& y, ColT<S>& mean,
                    ColT<S>& rstd);
// dx = ∂L/∂x; dw, db accumulate.
template <class S>
void layer_norm_bwd(const MatT<S>& dy, const MatT<S>& x, const VecT<S>& w, const ColT<S>& mean, const ColT<S>& rstd,
                    MatT<S>& dx, VecT<S>& dw, VecT<S>& db);

template <class S>
void rms_norm_fwd(const MatT<S>& x, const VecT<S>& w, S eps, MatT<S>& y, ColT<S>& rstd);
template <class S>
void rms_norm_bwd(const MatT<S>& dy, const MatT<S>& x, const VecT<S>& w, const ColT<S>& rstd, MatT<S>& dx,
                  VecT<S>& dw);

// y = x·W (+ b); backward: dx = dy·Wᵀ (dx_add: dx += …), dW += xᵀ·dy, db += Σrows dy.
template <class S>
void linear_fwd(const MatT<S>& x, const MatT<S>& w, const VecT<S>& b, MatT<S>& y);
template <class S>
void linear_bwd(const MatT<S>& dy, const MatT<S>& x, const MatT<S>& w, MatT<S>* dx, bool dx_add, MatT<S>& dw,
                VecT<S>* db);

template <class S>
void gelu_fwd(const MatT<S>& x, MatT<S>& y);  // tanh form
template <class S>
void gelu_bwd(const MatT<S>& dy, const MatT<S>& x, MatT<S>& dx);

// y = silu(gate) ⊙ up
template <class S>
void swiglu_fwd(const MatT<S>& gate, const MatT<S>& up, MatT<S>& y);
template <class S>
void swiglu_bwd(const MatT<S>& dy, const MatT<S>& gate, const MatT<S>& up, MatT<S>& dgate, MatT<S>& dup);

// RoPE in place on x (N, heads·d), row r at position r % T (rotate-half, as core/engine/ops.h).
// inverse = rotate by the opposite angle, which is the backward pass (rotations are
// orthogonal: ∂L/∂x = Rᵀ ∂L/∂y).
template <class S>
void rope_rows(MatT<S>& x, int heads, int d, int T, const std::vector<double>& inv_freq, bool inverse);

// Causal attention of B sequences of T tokens. q (N, H*d), k and v (N, KV*d) (after RoPE);
// query head h reads KV head h / (H/KV). Writes att (N, H*d) and probs (B, H, T, T).
template <class S>
void attention_fwd(const MatT<S>& q, const MatT<S>& k, const MatT<S>& v, int B, int T, int H, int KV, int d,
                   MatT<S>& att, std::vector<S>& probs);
// Writes dq, dk, dv; the gradient of a KV head sums over its query group.
template <class S>
void attention_bwd(const MatT<S>& datt, const MatT<S>& q, const MatT<S>& k, const MatT<S>& v,
                   const std::vector<S>& probs, int B, int T, int H, int KV, int d, MatT<S>& dq, MatT<S>& dk,
                   MatT<S>& dv);

// Mean cross-entropy of logits (N, V) against targets (N); dlogits (N, V) when not null.
template <class S>
S cross_entropy(const MatT<S>& logits, const std::vector<int>& targets, MatT<S>* dlogits);

// ---------------------------------------------------------------------------------------
// The model.

template <class S>
struct LayerActs {
  MatT<S> x;              // (N, C) residual stream entering the layer
  MatT<S> h1;             // (N, C) norm1(x)
  ColT<S> mean1, rstd1;   // (N)
  MatT<S> q, k, v;        // (N, H*d), (N, KV*d), (N, KV*d) as used (after RoPE)
  std::vector<S> probs;   // (B, H, T, T)
  MatT<S> att;            // (N, H*d) head outputs, concatenated
  MatT<S> x2;             // (N, C) x + attention
  MatT<S> h2;             // (N, C) norm2(x2)
  ColT<S> mean2, rstd2;   // (N)
  MatT<S> fc;             // (N, I) gpt2 c_fc pre-activation / llama gate pre-activation
  MatT<S> up;             // (N, I) llama up_proj
  MatT<S> act;            // (N, I) gelu(fc) / silu(fc)·up
};

template <class S>
struct Activations {
  std::vector<LayerActs<S>> layers;
  MatT<S> xf;              // (N, C) final residual
  MatT<S> hf;              // (N, C) final norm
  ColT<S> meanf, rstdf;    // (N)
  MatT<S> logits;          // (N, V)
};

// Mean next-token loss of B sequences: inputs and targets (B·T) ids, row-major by sequence.
// When `grads` is not null, ADDS ∂loss/∂param into it (same shapes as p). `acts` holds the
// forward pass afterwards (logits included).
template <class S>
S model_loss(const ModelConfig& c, const Params<S>& p, const std::vector<int>& inputs, const std::vector<int>& targets,
             int B, int T, Params<S>* grads, Activations<S>& acts);

}  // namespace attnviz
