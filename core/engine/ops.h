// The forward pass's operations as pure functions on row-major matrices: every row of x is
// one token, (n, C) unless said. The CPU backend composes them; the literal reference in
// core/engine/reference.cpp re-does each with plain loops and the tests compare the two.
#pragma once
#include "core/model/model.h"

namespace attnviz {

// y = (x - mean) / sqrt(var + eps) * w + b, per row.
void layer_norm(const Mat& x, const Vec& w, const Vec& b, float eps, Mat& y);
// y = x / sqrt(mean(x²) + eps) * w, per row.
void rms_norm(const Mat& x, const Vec& w, float eps, Mat& y);
// Normalisation of the model's kind (LayerNorm for gpt2, RMSNorm for llama).
void norm(const ModelConfig& c, const Mat& x, const Vec& w, const Vec& b, Mat& y);

// y = x · W (+ b): W (in, out), b (out) or empty.
void linear(const Mat& x, const Mat& w, const Vec& b, Mat& y);
// y (rows, n) = x (rows, C) · Wt[r0 : r0 + n]ᵀ with Wt (N, C) (the unembedding; by default
// all N rows), into a block of the caller's.
void linear_bt(const Mat& x, const Mat& wt, Eigen::Ref<Mat> y, Eigen::Index r0 = 0, Eigen::Index n = -1);
// y (M, N) = x (M, K) · Wᵀ for W (N, K), all row-major with the given leading dimensions,
// on the library below (as linear_bt's products of more than 4 rows; Eigen otherwise).
// stored_product runs its decoded panels of weights through this. (linear and linear_bt
// with a Weight, which may be stored, are in core/engine/stored_product.h.)
void gemm_bt(const float* x, int64_t M, int64_t K, int64_t ldx, const float* w, int64_t N, int64_t ldw, float* y,
             int64_t ldy);
// Which library `linear` and `linear_bt` run their products on: "eigen", "openblas" or
// "blis" (CMake option ATTNVIZ_BLAS).
const char* blas_name();
// The kernels the library runs: OpenBLAS's core name ("SkylakeX"), BLIS's configuration
// ("skx"), or "" for Eigen.
std::string blas_kernels();

// RMSNorm of each of `heads` slices of d values of every row of x (n, heads·d), in place,
// with weights w (d); heads = 1, d = the row's width normalises whole rows. QK-norm.
void rms_norm_heads(Mat& x, int heads, int d, const Vec& w, float eps);

// GELU, tanh form: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
void gelu_tanh_inplace(Mat& x);
// SwiGLU: gate ← silu(gate) ⊙ up, silu(x) = x / (1 + e^−x).
void swiglu_inplace(Mat& gate, const Mat& up);
// The MLP's activation of the model's kind on gate (n, I): GELU alone (gpt2), SwiGLU or GeGLU
// (gelu_tanh(gate) ⊙ up) with up (n, I).
void mlp_activation(const ModelConfig& c, Mat& gate, const Mat& up);

// The model's final soft-cap on n logits in place: x ← c·tanh(x/c) (Gemma 2); nothing
// for other models. (Granite's logits_scaling is folded into Trace::final_hidden.)
void finish_logits(const ModelConfig& c, float* logits, int64_t n);

// Rotary position embedding, rotate-half convention, in place on x (n, heads·d): row r is
// at position pos0 + r; with rot = 2 · inv_freq.size() ≤ d rotary dims (the first of each
// head; partial_rotary_factor), pairs (i, i + rot/2) turn by angle pos · inv_freq[i]
// (rope_inv_freq: theta^(−2i/rot), after the model's rope_scaling), the frequency rounded
// to float; cos and sin are multiplied by mscale (longrope's attention factor, else 1).
void rope_inplace(Mat& x, int heads, int d, int pos0, const std::vector<double>& inv_freq_d, float mscale = 1.f);

// Softmax of one row whose entries past `last` are −inf (masked): reads masked[0..last],
// writes probs[0..len), zeros after `last`. probs may be masked (in place). The result does
// not depend on where the row lies in memory (its sum is taken in a fixed order).
void softmax_causal_row(const float* masked, int len, int last, float* probs);
// The same over the visible keys [first, last] of a local layer's row: reads masked[first
// … last], writes probs[0, len) with exact zeros outside [first, last] (an exp of −inf is
// not exactly 0 in every SIMD build, so the keys outside the window are not exponentiated).
// With `sink` (GPT-OSS), the softmax also runs over one more logit, *sink, a column that is
// then dropped: probs sum to 1 − p_sink, and *sink_p (if given) gets p_sink.
void softmax_window_row(const float* masked, int len, int first, int last, float* probs, const float* sink = nullptr,
                        float* sink_p = nullptr);

// A head's (T, d) queries or keys, rows ld apart; a block of (rows, T) attention rows.
using ConstRowsRef = Eigen::Ref<const Mat, 0, Eigen::OuterStride<>>;
using RowsRef = Eigen::Ref<Mat, 0, Eigen::OuterStride<>>;

// Query rows handled together, for T keys: a block's S and P stay in cache while it is
// scaled, masked and normalised.
int attention_row_block(int T);

// S (rows, T) = Q (rows, d) · Kᵀ, with K given transposed: Kt (d, T). Each element is summed
// over k = 0 … d−1 in that order whatever the shapes, so a row of scores has the same bits
// whether it was computed alone (an appended token), as the new columns of an old row, or
// in a block of a full pass (Eigen's products choose kernels by shape and differ in the
// last bit). Vectorised across keys.
void scores_rows(const float* q, int64_t ldq, const float* kt, int64_t ldk, int rows, int d, int T, float* s,
                 int64_t lds);
// A head's keys K (T, d) transposed for scores_rows: (d, T). The second form reuses `out`'s
// storage (a forward pass transposes every layer's keys).
Mat keys_transposed(ConstRowsRef K);
void keys_transposed(ConstRowsRef K, Mat& out);

// How a layer turns scores into weights: scaled = scores · scale; capped = c·tanh(scaled/c)
// when softcap c > 0; masked = that with −inf where attention_masked(i, j, window).
struct AttnRule {
  float scale = 1.f;
  float softcap = 0.f;  // 0: none
  int window = 0;       // 0: global
  const float* sink = nullptr;  // the head's sink logit (GPT-OSS): an extra softmax column, dropped; null: none
};

// Rows [r0, r0 + rb) of one head's attention, rb = S.rows(): S = Q[r0 : r0+rb] · Kᵀ over all
// T = S.cols() keys (unscaled: the recorded `scores`, through scores_rows), and P = softmax
// of the masked scores (the recorded `probs`, see AttnRule). Q (T, d), Kt from
// keys_transposed; S and P are (rb, T). The CPU backend computes its blocks through this and a compact trace
// recomputes a head, or one row, through it, so both give the same bits.
// With a sink in the rule, sink_p (if given) gets each row's sink probability (rb).
void attention_block(ConstRowsRef Q, ConstRowsRef Kt, const AttnRule& rule, int r0, RowsRef S, RowsRef P,
                     float* sink_p = nullptr);

}  // namespace attnviz
