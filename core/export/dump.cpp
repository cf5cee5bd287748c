#include "core/export/dump.h"

#include <algorithm>

#include "core/model/safetensors.h"

namespace attnviz {

std::string dump_tensor_name(int layer, Stage s) {
  return "layers." + std::to_string(layer) + "." + stage_name(s);
}

void write_dump(const Trace& tr, const std::string& path, const std::vector<std::pair<std::string, const Tensor*>>& extra) {
  SafetensorsWriter w;
  const std::vector<int32_t> tokens(tr.tokens.begin(), tr.tokens.end());
  w.add_i32("tokens", {tr.T()}, tokens.data());
  for (size_t l = 0; l < tr.layers.size(); ++l)
    for (int s = 0; s < kStageCount; ++s) {
      const LayerTrace& lt = tr.layers[l];
      const Stage st = static_cast<Stage>(s);
      if (const Tensor* t = lt.stored(st); t && t->dense()) {
        w.add_f32_ref(dump_tensor_name(static_cast<int>(l), st), t->shape, t->data.data());
      } else {
        // Derived, or stored with room to grow: written one head at a time, never held whole.
        const std::vector<int64_t> shape = lt.shape(st);
        const int64_t per_head = shape[1] * shape[2];
        w.add_f32_generated(dump_tensor_name(static_cast<int>(l), st), shape, [&lt, st, per_head](int64_t h, float* dst) {
          std::vector<float> scratch;
          const float* src = lt.head_values(st, h, scratch);
          std::copy(src, src + per_head, dst);
        });
      }
    }
  w.add_f32_ref("logits", tr.logits.shape, tr.logits.data.data());
  for (const auto& [name, t] : extra) w.add_f32_ref(name, t->shape, t->data.data());
  w.set_metadata("model", tr.model);
  w.set_metadata("backend", tr.backend);
  w.set_metadata("block_size", std::to_string(tr.block_size));
  w.set_metadata("dropped", std::to_string(tr.dropped));
  if (!tr.ablation.empty()) {  // the heads this run replaced, "L:H,..." and zero|mean
    w.set_metadata("ablate", tr.ablation.to_string());
    w.set_metadata("ablate_mode", ablation_mode_name(tr.ablation.mode));
  }
  w.set_metadata("n_layer", std::to_string(tr.layers.size()));
  w.set_metadata("format", "attnviz-dump-1");
  w.write(path);
}

}  // namespace attnviz
