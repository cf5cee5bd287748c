#include "core/trace.h"

#include <algorithm>
#include <cstring>

namespace attnviz {

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

void Tensor::resize_keep(std::vector<int64_t> new_shape, int64_t keep_rows, int64_t keep_cols) {
  if (new_shape == shape) return;  // same layout: the kept block is already in place
  const bool three = new_shape.size() == 3;
  const int64_t heads = three ? new_shape[0] : 1;
  const int64_t rows = new_shape[three ? 1 : 0], cols = new_shape[three ? 2 : 1];
  std::vector<float> fresh(static_cast<size_t>(heads * rows * cols), 0.f);
  if (!data.empty() && shape.size() == new_shape.size() && (!three || shape[0] == heads)) {
    const int64_t old_rows = shape[three ? 1 : 0], old_cols = shape[three ? 2 : 1];
    const int64_t kr = std::min({keep_rows, old_rows, rows}), kc = std::min({keep_cols, old_cols, cols});
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < kr; ++i)
        std::memcpy(&fresh[static_cast<size_t>((h * rows + i) * cols)],
                    &data[static_cast<size_t>((h * old_rows + i) * old_cols)], static_cast<size_t>(kc) * sizeof(float));
  }
  shape = std::move(new_shape);
  data = std::move(fresh);
}

const char* stage_name(Stage s) {
  static const char* names[kStageCount] = {"q", "k", "v", "scores", "scaled", "masked", "probs", "out"};
  return names[static_cast<int>(s)];
}

const Tensor& LayerTrace::stage(Stage s) const {
  switch (s) {
    case Stage::Q: return q;
    case Stage::K: return k;
    case Stage::V: return v;
    case Stage::Scores: return scores;
    case Stage::Scaled: return scaled;
    case Stage::Masked: return masked;
    case Stage::Probs: return probs;
    case Stage::Out: return out;
  }
  return probs;
}
Tensor& LayerTrace::stage(Stage s) { return const_cast<Tensor&>(static_cast<const LayerTrace*>(this)->stage(s)); }

size_t Trace::bytes() const {
  size_t n = logits.data.size();
  for (const auto& l : layers)
    for (int s = 0; s < kStageCount; ++s) n += l.stage(static_cast<Stage>(s)).data.size();
  return n * sizeof(float);
}

}  // namespace attnviz
