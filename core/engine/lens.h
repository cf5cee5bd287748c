// What the model predicts after each layer (the logit lens) and which parts of the network
// wrote a logit (direct logit attribution), read from a recorded trace.
//
// Both need the residual stream the CPU backend records (LayerTrace::resid and
// Trace::final_resid); a trace without it is an Error that says to run on the CPU.
#pragma once
#include <atomic>
#include <vector>

#include "core/engine/trace.h"
#include "core/model/model.h"

namespace attnviz {

// One cell of the lens: the stream after one layer at one position, through the final
// norm (with Granite's logit_scale), the unembedding and the final soft-cap, as
// probabilities.
struct LensCell {
  std::vector<int> top_ids;      // (K) most probable first (ties: the lower id first)
  std::vector<float> top_probs;  // (K)
  float next_prob = -1.f;        // probability of the token that comes next; −1 at the last position
  int next_rank = -1;            // its rank (0 = top: no token has a larger logit); −1 at the last position
};

// The lens of layer `layer` (0 … L−1: the stream after that layer) at `positions`, one cell
// each, in the order given. Only those rows go through the (C, V) unembedding, in blocks.
// Layer L−1 reads the model's own final hidden state, so its cells are the model's
// prediction. Throws a usage Error for a layer or position out of range or top_k < 1, a
// data Error when the trace lacks the residual stream. `cancel`, when set during the
// work, makes it throw Cancelled between blocks.
std::vector<LensCell> logit_lens(const Model& m, const Trace& tr, int layer, const std::vector<int>& positions,
                                 int top_k, const std::atomic<bool>* cancel = nullptr);

// The stream after layer `layer` at `positions` through the final norm and logit_scale:
// (positions, C), the rows the lens multiplies by the unembedding.
Mat lens_hidden(const Model& m, const Trace& tr, int layer, const std::vector<int>& positions);

// Direct logit attribution at one position: the logit of target_ids[0] (minus that of
// target_ids[1] when given), split along the residual stream with the final norm's scale
// frozen at the run's value (and every gate inside a layer: Qwen3.5's σ(gate), its linear
// layers' gated norm r·w ⊙ SiLU(z), LFM2's convolution gates). For RMSNorm, norm(x) = s·w ⊙ x with s = 1/rms(x) frozen; for
// LayerNorm the mean subtraction is linear too, so every part is centred before the frozen
// scale. Each part p contributes (logit_scale·s·w ⊙ (u_A − u_B)) · p (centred for
// LayerNorm), u the unembedding rows.
struct Attribution {
  int position = 0;
  std::vector<int> target_ids;            // A, or A and B
  double logit = 0;                       // the model's logit of A (or A − B) at the position
  std::vector<std::vector<double>> heads; // [L][H] each head's output through its rows of wo (a hybrid:
                                          // each layer's own heads, a linear layer's Hv value heads through
                                          // out_proj, none for a convolution layer)
  std::vector<double> mlp;                // [L] each MLP's output (without b_down)
  std::vector<double> conv;               // [L] a short-convolution layer's output (without its bias); 0 elsewhere
  double embed = 0;                       // token (+ position) embedding × emb_scale
  double rest = 0;                        // biases: bo, b_down, the final norm's
  double sum = 0;                         // embed + heads + mlp + rest
  double norm_scale = 0;                  // s, the frozen final-norm scale 1/√(var + eps)
};

// The attribution at `position` (a usage Error when outside the trace) for `target_ids`
// (one or two ids inside the vocabulary, else a usage Error). Models whose blocks norm
// their branch outputs (Gemma 2/3's sandwich norms, OLMo 2) or soft-cap the final logits
// are refused with a data Error saying why: no part is linear there. Heads whose output
// the run replaced (ablation) contribute their replaced output, as the run did.
Attribution direct_logit_attribution(const Model& m, const Trace& tr, int position, const std::vector<int>& target_ids);

// Direct logit attribution carried back to the keys (through the heads: a linear layer's
// through A, o_i = Σ_j A[i,j]·v_j, its frozen gated norm applied to v_j; a convolution
// layer's part is not split by key). Head h of layer l adds at position i
// its output o = Σ_j a_ij·v_j through its rows of wo (Wo_h, (d, C)), so its share of the
// logit is Σ_j a_ij·(v_j · r_h) with r_h = residual_scale · Wo_h·g, g the direction of the
// attribution above (the target's unembedding through the frozen final norm). Key j's share
// through that head is a_ij·(v_j · r_h): what the head carried from token j to the logit.
// Summed over j it is Attribution::heads[l][h].
struct KeyAttribution {
  int position = 0;
  std::vector<int> target_ids;  // A, or A and B
  double logit = 0;             // the model's logit of A (or A − B) at the position
  int L = 0, H = 0, T = 0;
  std::vector<float> shares;      // (L, H, T) key j's share through head h of layer l; 0 for keys
                                  // the head does not see (after the position, outside a window)
  std::vector<uint8_t> replaced;  // (L, H) 1: the run replaced the head's output (ablation,
                                  // patching), so no key carried it: its shares are 0
  const float* head(int l, int h) const { return shares.data() + (static_cast<size_t>(l) * H + h) * T; }  // (T)
};

// The key shares at `position` for `target_ids`, with the checks and Errors of
// direct_logit_attribution (it needs the same trace and model). Each head's attention row
// comes from LayerTrace::row_values (one row's work in a compact trace). `cancel`, when set
// during the work, makes it throw Cancelled between layers.
KeyAttribution key_attribution(const Model& m, const Trace& tr, int position, const std::vector<int>& target_ids,
                               const std::atomic<bool>* cancel = nullptr);

// The id with the largest logit at `position` (the lowest id among equals).
int predicted_token(const Model& m, const Trace& tr, int position);

}  // namespace attnviz
