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

}  // namespace attnviz
