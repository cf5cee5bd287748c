#include "core/export/filmstrip.h"

#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/error.h"
#include "core/model/safetensors.h"

namespace attnviz {

std::string render_filmstrip(const std::vector<FilmstripFrame>& frames, const std::vector<int>& ids, int layer,
                             int head, int cell_px, ExportFormat f) {
  if (frames.empty()) throw Error("a filmstrip needs at least one step", ErrorKind::Usage);
  if (ids.empty()) throw Error("a filmstrip needs a text of at least one token", ErrorKind::Usage);
  if (layer < 0 || head < 0) throw Error("a filmstrip shows one head: layer and head must be ≥ 0", ErrorKind::Usage);
  ExportOptions o;
  o.stage = Stage::Probs;
  o.layer = layer;
  o.head = head;
  std::vector<std::unique_ptr<Engine>> engines;  // each keeps its Trace, which the views point into
  std::vector<MatrixView> views;
  for (const auto& fr : frames) {
    engines.push_back(std::make_unique<Engine>(fr.model, make_cpu_backend()));
    const Trace& tr = engines.back()->run(ids);
    MatrixView v = select_views(tr, *fr.model, o).front();
    v.caption = "step " + std::to_string(fr.step);
    views.push_back(std::move(v));
  }
  const Model& m = *frames.front().model;
  const std::string title = "layer " + std::to_string(layer) + " · head " + std::to_string(head) +
                            " · attention weights while " + (m.name.empty() ? "the model" : m.name) + " trains";
  return render_views(views, title, static_cast<int>(views.size()), Colormap::Viridis, cell_px, f);
}

void write_filmstrip(const std::vector<FilmstripFrame>& frames, const std::vector<int>& ids, int layer, int head,
                     int cell_px, const std::string& path) {
  const ExportFormat f = format_of_path(path);
  if (f != ExportFormat::Png && f != ExportFormat::Svg)
    throw Error("a filmstrip is a .png or .svg file, not '" + path + "'", ErrorKind::Usage);
  write_file_atomic(path, render_filmstrip(frames, ids, layer, head, cell_px, f));
}

std::pair<int, int> parse_layer_head(const std::string& s, const std::string& what) {
  const auto bad = [&] { return Error(what + " must be LAYER:HEAD (like 1:2), not '" + s + "'", ErrorKind::Usage); };
  const size_t colon = s.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) throw bad();
  const std::string a = s.substr(0, colon), b = s.substr(colon + 1);
  if (a.find_first_not_of("0123456789") != std::string::npos ||
      b.find_first_not_of("0123456789") != std::string::npos || a.size() > 6 || b.size() > 6)
    throw bad();
  return {std::stoi(a), std::stoi(b)};
}

}  // namespace attnviz
