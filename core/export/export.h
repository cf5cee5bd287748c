// Export of recorded matrices as images and data, shared by `attnviz-cli export` and the
// GUI's export buttons. The format follows the file's extension:
//   .png  heatmap with token labels on both axes, title, colorbar with its range, masked
//         (−inf) cells in masked_rgb(); `cell_px` pixels per cell
//   .svg  the same as vectors: one <rect> per cell (data-row, data-col, data-value), <text>
//   .csv  header row of key tokens, then one row per query token ("-inf" where masked)
//   .npy  the exact float32 matrix; a grid is stacked to (heads, rows, cols) or
//         (layers, heads, rows, cols)
// Several (layer, head) pairs make one labelled grid (one row of tiles per layer).
// Files are written atomically: a failure leaves no partial file.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/export/colormap.h"
#include "core/model/model.h"
#include "core/engine/trace.h"

namespace attnviz {

enum class ExportFormat { Png, Svg, Csv, Npy };

struct ExportOptions {
  Stage stage = Stage::Probs;
  int layer = -1;  // −1: every layer
  int head = -1;   // −1: every head (query heads; KV heads for the k and v stages)
  std::optional<Colormap> colormap;  // default: viridis for probs, diverging otherwise
  int cell_px = 24;
};

// One matrix as exported: (rows, cols) values of a layer/head/stage with its axis labels.
struct MatrixView {
  int layer = 0, head = 0;  // head: a query head, or a KV head for the k and v stages
  int kv_head = -1;         // the KV head a query head reads, when the model has GQA/MQA; else −1
  Stage stage = Stage::Probs;
  int rows = 0, cols = 0;
  const float* values = nullptr;  // (rows, cols) inside the Trace, or in `derived`
  std::shared_ptr<const std::vector<float>> derived;  // the values of a derived stage (scaled, masked)
  bool causal_mask = false;       // probs: cells j > i are masked (their weight is exactly 0)
  std::vector<std::string> row_labels;  // query tokens
  std::vector<std::string> col_labels;  // key tokens, or dimension indices for q/k/v/out
  std::string caption;                  // a tile's title instead of "L0 H3" (e.g. "step 300")
  std::string name() const;             // "layer 0 · head 3 · probs"
};

Stage parse_stage(const std::string& s);        // usage Error listing the choices
Colormap parse_colormap(const std::string& s);  // usage Error listing the choices
ExportFormat format_of_path(const std::string& path);  // usage Error for other extensions

// The matrices `o` selects; usage Error when a layer or head is out of range.
std::vector<MatrixView> select_views(const Trace& tr, const Model& m, const ExportOptions& o);

// The file's bytes.
std::string render_export(const Trace& tr, const Model& m, const ExportOptions& o, ExportFormat f);

// A PNG or SVG figure of `views` (all of one stage), `tiles_per_row` tiles side by side,
// under `title`: what render_export draws once it has chosen the views.
std::string render_views(const std::vector<MatrixView>& views, const std::string& title, int tiles_per_row,
                         Colormap cm, int cell_px, ExportFormat f);

// render_export to `path`, atomically; returns a one-line note (e.g. no font found) or "".
std::string export_to_file(const Trace& tr, const Model& m, const ExportOptions& o, const std::string& path);


// The colour range used for `views` under colormap `c`: [0, 1] for probs with a sequential
// map, symmetric around 0 for diverging, else the finite min … max over all views.
ValueRange export_range(const std::vector<MatrixView>& views, Colormap c);

}  // namespace attnviz
