#include "core/model/mixer.h"

#include "core/model/config.h"

namespace attnviz {

MixerInfo mixer_info(Mixer m) {
  switch (m) {
    case Mixer::Softmax: return {"softmax", "softmax attention", true, true};
    case Mixer::GatedDeltaNet: return {"gated_delta", "linear attention (gated delta rule)", false, true};
    case Mixer::ShortConv: return {"short_conv", "short convolution", false, false};
  }
  return {"unknown", "unknown mixer", false, false};
}

std::vector<int64_t> mixer_out_shape(const ModelConfig& c, int l, int64_t T) {
  switch (c.layer(l).mixer) {
    case Mixer::Softmax: return {c.n_head, T, c.head_size_at(l)};
    case Mixer::GatedDeltaNet: return {c.linear.v_heads, T, c.linear.v_dim};
    case Mixer::ShortConv: return {};
  }
  return {};
}

}  // namespace attnviz
