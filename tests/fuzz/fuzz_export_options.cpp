// The export options as the CLI takes them, one per line: stage, layer, head, colormap,
// cell size, output path. Validated like `attnviz-cli export` does, then the selected
// matrices rendered in memory (CSV and NPY; PNG/SVG are validated and their views
// selected, not drawn, to keep an execution short). Nothing is written to disk.
#include <cstdlib>
#include <memory>
#include <sstream>

#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/error.h"
#include "core/export/export.h"
#include "core/model/random_model.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

struct Fixture {
  std::unique_ptr<attnviz::Engine> engine;
};

const Fixture& fixture() {
  static const Fixture f = [] {
    attnviz::ModelConfig c = attnviz::preset_config("tiny");
    c.n_layer = 2, c.n_embd = 16, c.n_head = 4, c.n_kv_head = 2, c.head_size = 4, c.n_inner = 24, c.n_ctx = 16;
    const std::string dir = attnviz::fuzz::scratch_dir() + "/model";
    attnviz::write_random_model(c, 7, dir);
    Fixture out;
    out.engine = std::make_unique<attnviz::Engine>(attnviz::load_model(dir), attnviz::make_backend("cpu", nullptr));
    out.engine->run({1, 2, 3, 4});
    return out;
  }();
  return f;
}

// "all" → −1; a decimal integer as the CLI reads it (std::stoi); else a usage Error.
int parse_index(const std::string& s) {
  if (s == "all") return -1;
  size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(s, &used);
  } catch (const std::exception&) {
    throw attnviz::Error("not a number", attnviz::ErrorKind::Usage);
  }
  if (used != s.size() || v < 0) throw attnviz::Error("not a number", attnviz::ErrorKind::Usage);
  return v;
}

}  // namespace

ATTNVIZ_FUZZ_TARGET(export_options) {
  const Fixture& fx = fixture();
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string field[6];
  for (auto& f : field)
    if (!std::getline(in, f)) break;
  try {
    attnviz::ExportOptions o;
    o.stage = attnviz::parse_stage(field[0]);
    o.layer = parse_index(field[1]);
    o.head = parse_index(field[2]);
    if (!field[3].empty()) o.colormap = attnviz::parse_colormap(field[3]);
    o.cell_px = field[4].empty() ? 24 : parse_index(field[4]);
    const attnviz::ExportFormat format = attnviz::format_of_path(field[5]);
    const auto& e = *fx.engine;
    const auto views = attnviz::select_views(e.trace(), e.model(), o);
    if (format == attnviz::ExportFormat::Csv || format == attnviz::ExportFormat::Npy)
      (void)attnviz::render_export(e.trace(), e.model(), o, format);
  } catch (const attnviz::Error&) {
  }
}
