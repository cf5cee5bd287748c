#include "app/commands.h"
#include "core/export/dump.h"

namespace attnviz {

namespace {

struct DumpOptions {
  InputOptions in;
  std::string out;
};

void run_dump(const DumpOptions& o, Io& io) {
  const Engine engine = run_input(o.in, io.err);
  write_dump(engine.trace(), o.out);
  const Trace& tr = engine.trace();
  io.err << "wrote " << o.out << ": " << tr.layers.size() << " layers, T=" << tr.T() << ", dropped " << tr.dropped
         << "\n";
}

}  // namespace

Action add_dump_command(CLI::App& app, Io& io) {
  auto o = std::make_shared<DumpOptions>();
  auto* cmd = app.add_subcommand("dump", "Run a model and write every recorded matrix to a safetensors file");
  add_input_options(cmd, o->in, true);
  cmd->add_option("--out", o->out, "output .safetensors file")->required();
  return [o, &io] { run_dump(*o, io); };
}

}  // namespace attnviz
