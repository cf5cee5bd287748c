// What describes a layer's mixer (LayerSpec::mixer: what mixes its tokens) to the code that
// reads its trace: its name, whether its matrix's rows are softmax weights, whether it has
// per-head outputs and their shape. One switch per question, a case for every kind and no
// `default:`, so that -Wswitch names each place a new kind must answer.
#pragma once
#include <cstdint>
#include <vector>

namespace attnviz {

enum class Mixer;    // core/model/config.h
struct ModelConfig;  // core/model/config.h

struct MixerInfo {
  const char* key;       // "softmax", "gated_delta", "short_conv": the kind in JSON (info --json, Python)
  const char* name;      // "softmax attention", "linear attention (gated delta rule)", "short convolution"
  bool rows_sum_to_one;  // its (H, T, T) matrix is softmax weights (probs); else an implicit matrix or none
  bool head_outputs;     // the trace holds per-head outputs `out` (a short convolution has none)
};
MixerInfo mixer_info(Mixer m);

// The shape of layer l's per-head outputs `out` at T tokens: (H, T, d) for softmax
// attention, (Hv, T, dv) for the gated delta rule; empty for a mixer without head outputs.
std::vector<int64_t> mixer_out_shape(const ModelConfig& c, int l, int64_t T);

}  // namespace attnviz
