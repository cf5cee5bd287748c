// A filmstrip: one head's attention weights (probs, (T, T)) on one text at several steps
// of a training run, side by side, each tile titled with its step. Written as PNG or SVG
// by the same drawing as every other export; used by `attnviz-cli train --filmstrip` and
// by the GUI's Training panel.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/export/export.h"
#include "core/model/model.h"

namespace attnviz {

struct FilmstripFrame {
  int step = 0;
  std::shared_ptr<const Model> model;  // the weights at that step
};

// Runs every frame's model on `ids` (the last block_size of them) on the CPU and draws
// layer `layer`, query head `head` of each. Usage Error for no frames or a layer/head out
// of range; `f` is Png or Svg.
std::string render_filmstrip(const std::vector<FilmstripFrame>& frames, const std::vector<int>& ids, int layer,
                             int head, int cell_px, ExportFormat f);

// render_filmstrip to `path` (format from its extension: .png or .svg), atomically.
void write_filmstrip(const std::vector<FilmstripFrame>& frames, const std::vector<int>& ids, int layer, int head,
                     int cell_px, const std::string& path);

// "L:H" → (layer, head); a usage Error naming `what` otherwise.
std::pair<int, int> parse_layer_head(const std::string& s, const std::string& what);

}  // namespace attnviz
