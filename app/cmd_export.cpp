#include "app/commands.h"
#include "core/error.h"
#include "core/limits.h"
#include "core/export/export.h"

namespace attnviz {

namespace {

// "all" → −1, else a non-negative integer.
int parse_index(const std::string& s, const char* what) {
  if (s == "all") return -1;
  try {
    size_t used = 0;
    const int v = std::stoi(s, &used);
    if (used == s.size() && v >= 0) return v;
  } catch (...) {
  }
  throw Error(std::string("--") + what + ": '" + excerpt(s) + "' is not a number or 'all'", ErrorKind::Usage);
}

struct ExportCommandOptions {
  InputOptions in;
  std::string layer = "0", head = "0", stage = "probs", out, colormap;
  int cell = 24;
};

void run_export(const ExportCommandOptions& o, Io& io) {
  ExportOptions opt;
  opt.stage = parse_stage(o.stage);
  opt.layer = parse_index(o.layer, "layer");
  opt.head = parse_index(o.head, "head");
  opt.cell_px = o.cell;
  if (!o.colormap.empty()) opt.colormap = parse_colormap(o.colormap);
  format_of_path(o.out);  // a usage error before any work
  const Engine engine = run_input(o.in, io.err);
  const std::string note = export_to_file(engine.trace(), engine.model(), opt, o.out);
  if (!note.empty()) io.err << format_message("note", note);
  io.err << "wrote " << o.out << "\n";
}

}  // namespace

Action add_export_command(CLI::App& app, Io& io) {
  auto o = std::make_shared<ExportCommandOptions>();
  auto* cmd = add_model_command(app, "export", "Export a recorded matrix (or a grid of them) as PNG, SVG, CSV or NPY", o->in, kTextOrTokens | kAblation);
  cmd->add_option("--layer", o->layer, "layer index or 'all' (default 0)");
  cmd->add_option("--head", o->head, "head index or 'all' (KV heads for --stage k/v; default 0)");
  cmd->add_option("--stage", o->stage, "q | k | v | scores | scaled | masked | probs | out (default probs)");
  cmd->add_option("--out", o->out, "output file: .png, .svg, .csv or .npy")->required();
  cmd->add_option("--cell", o->cell, "pixels per cell in images (default 24)");
  cmd->add_option("--colormap", o->colormap, "viridis | magma | diverging (default: viridis for probs, diverging otherwise)");
  return [o, &io] { run_export(*o, io); };
}

}  // namespace attnviz
