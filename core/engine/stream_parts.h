// The residual stream at one row split into what wrote it: the embeddings, each head's
// output through its rows of the output projection, each MLP, each short convolution, and
// the biases. Direct logit attribution (lens.h) reads the final stream this way, and score
// attribution (score_attribution.h) the stream entering a layer.
//
// Every norm and gate inside a branch is frozen at the run's value for that row: a
// sandwich post-norm's scale 1/rms(branch), a gated softmax head's σ(gate), a linear
// layer's gated norm r·w ⊙ SiLU(z), LFM2's convolution gates. The parts then sum to the
// recorded stream (to float rounding), and each is what that piece of the network added.
#pragma once
#include <string>
#include <vector>

#include "core/engine/trace.h"
#include "core/model/model.h"

namespace attnviz {

enum class PartKind { Embed, Pos, Head, Mlp, Conv, Bias };

struct StreamPart {
  PartKind kind = PartKind::Embed;
  int layer = -1;  // Head, Mlp, Conv: the layer that wrote it; −1 otherwise
  int head = -1;   // Head: the head (a linear layer's value head); −1 otherwise
};

// The name of a part as the CLI gives it: "embed", "pos", "L3H5", "L3.mlp", "L3.conv", "bias".
std::string part_name(const StreamPart& p);

struct StreamParts {
  std::vector<StreamPart> parts;  // (P) embed, [pos], then per layer its heads (or conv) and its MLP, then bias
  Mat rows;                       // (P, C) each part's vector; row P−1 is every bias (bo, b_down, conv out bias)
};

// The stream entering layer `layer` (0 … L; L: the final stream, before the final norm) at
// `row`, split into parts. Needs the residual stream the CPU backend records and every
// earlier softmax or linear layer's head outputs (LayerTrace::out); throws a data Error
// saying so when the trace lacks them, and a usage Error for a layer or row out of range.
// Heads whose output the run replaced (ablation, patching) contribute the replaced output,
// as the run did.
StreamParts stream_parts(const Model& m, const Trace& tr, int layer, int row);

// What each head of layer l hands its output projection at row i, (heads, heads·width)
// block-diagonal, row h holding head h's vector, with every gate and norm scale frozen at
// the run's values: a softmax head's out_h (⊙ σ(gate_h) where the layer gates it), a
// linear-attention head's o_h · r_h · w ⊙ SiLU(z_h), r_h = 1/rms(o_h) (the gated norm).
// `mult` (heads, width) gets the factor each out (or o) value is multiplied by, so that a
// key's share through head h is A[i,j]·((v_j ⊙ mult_h)·Wo_h·g). z is recomputed for row i
// from the residual stream the trace holds.
void head_blocks(const ModelConfig& c, const LayerWeights& lw, const LayerTrace& lt, int i, Mat& blocks, Mat& mult);

// An LFM2 short-convolution layer's output at row i (1, C) before out_proj's bias, the
// gates as the run had them: C_i ⊙ conv(B ⊙ x) over rows i − K + 1 … i, recomputed from the
// residual stream the trace holds.
Mat short_conv_row(const ModelConfig& c, const LayerWeights& lw, const LayerTrace& lt, int i);

}  // namespace attnviz
