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
// y (n, N) = x (n, C) · Wtᵀ with Wt (N, C) (the unembedding), into a block of the caller's.
void linear_bt(const Mat& x, const Mat& wt, Eigen::Ref<Mat> y);

// GELU, tanh form: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
void gelu_tanh_inplace(Mat& x);
// SwiGLU: gate ← silu(gate) ⊙ up, silu(x) = x / (1 + e^−x).
void swiglu_inplace(Mat& gate, const Mat& up);

// Rotary position embedding, rotate-half convention, in place on x (n, heads·d): row r is
// at position pos0 + r; pairs (i, i + d/2) turn by angle pos · theta^(−2i/d).
void rope_inplace(Mat& x, int heads, int d, int pos0, float theta);

// Softmax of one row whose entries past `last` are −inf (masked): reads masked[0..last],
// writes probs[0..len), zeros after `last`. probs may be masked (in place).
void softmax_causal_row(const float* masked, int len, int last, float* probs);

}  // namespace attnviz
