#include "core/dump.h"

#include "core/safetensors.h"

namespace attnviz {

std::string dump_tensor_name(int layer, Stage s) {
  return "layers." + std::to_string(layer) + "." + stage_name(s);
}

void write_dump(const Trace& tr, const std::string& path) {
  SafetensorsWriter w;
  const std::vector<int32_t> tokens(tr.tokens.begin(), tr.tokens.end());
  w.add_i32("tokens", {tr.T()}, tokens.data());
  for (size_t l = 0; l < tr.layers.size(); ++l)
    for (int s = 0; s < kStageCount; ++s) {
      const Tensor& t = tr.layers[l].stage(static_cast<Stage>(s));
      w.add_f32(dump_tensor_name(static_cast<int>(l), static_cast<Stage>(s)), t.shape, t.data.data());
    }
  w.add_f32("logits", tr.logits.shape, tr.logits.data.data());
  w.set_metadata("model", tr.model);
  w.set_metadata("backend", tr.backend);
  w.set_metadata("block_size", std::to_string(tr.block_size));
  w.set_metadata("dropped", std::to_string(tr.dropped));
  w.set_metadata("n_layer", std::to_string(tr.layers.size()));
  w.set_metadata("format", "attnviz-dump-1");
  w.write(path);
}

}  // namespace attnviz
