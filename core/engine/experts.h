// GPT-OSS's mixture of experts, the one MLP that is not a single matrix product chain: the
// CPU backend and the stream split (qk attribution) both run it through this.
#pragma once
#include "core/engine/trace.h"
#include "core/model/model.h"

namespace attnviz {

// GPT-OSS's mixture of experts (ModelConfig::Experts) on hm (n, C), the normed rows
// [p, p + n) entering the MLP: out (n, C) = Σ over each row's K chosen experts of weight ·
// expert(row), biases included. With lt (and its router tensor laid out for the window),
// the router's logits and each row's choice are recorded there (LayerTrace::router, experts,
// expert_weights). Rows are grouped by expert, so each expert's matrices are read once.
void experts_branch(const ModelConfig& c, const LayerWeights& lw, const Mat& hm, int p, LayerTrace* lt, Mat& out);
// Gemma 4's experts (ModelConfig::Experts::gemma) on x (n, C), the stream entering the
// feed-forward block at rows [p, p + n): the router on RMSNorm(x)·scale·C^−½, softmax over
// all E, the top K renormalised × the per-expert scale; each chosen expert's gelu_tanh(gate)
// ·up on pre_feedforward_layernorm_2(x). out (n, C) before its post norm; recorded as above.
void gemma4_experts_branch(const ModelConfig& c, const LayerWeights& lw, const Mat& x, int p, LayerTrace* lt, Mat& out);

}  // namespace attnviz
