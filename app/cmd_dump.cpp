#include "app/commands.h"
#include "core/engine/rollout.h"
#include "core/export/dump.h"

namespace attnviz {

namespace {

struct DumpOptions {
  InputOptions in;
  std::string out;
  bool rollout = false;
};

void run_dump(const DumpOptions& o, Io& io) {
  const Engine engine = run_input(o.in, io.err);
  const Tensor rollout = o.rollout ? attention_rollout_all(engine.trace()) : Tensor{};
  write_dump(engine.trace(), o.out, o.rollout ? std::vector<std::pair<std::string, const Tensor*>>{{"rollout", &rollout}}
                                              : std::vector<std::pair<std::string, const Tensor*>>{});
  const Trace& tr = engine.trace();
  io.err << "wrote " << o.out << ": " << tr.layers.size() << " layers, T=" << tr.T() << ", dropped " << tr.dropped
         << "\n";
}

}  // namespace

Action add_dump_command(CLI::App& app, Io& io) {
  auto o = std::make_shared<DumpOptions>();
  auto* cmd = app.add_subcommand("dump", "Run a model and write every recorded matrix to a safetensors file");
  add_input_options(cmd, o->in, true);
  add_ablation_options(cmd, o->in);
  cmd->add_option("--out", o->out, "output .safetensors file")->required();
  cmd->add_flag("--rollout", o->rollout,
                "also write `rollout` (L, T, T): attention rollout after each layer, an approximation of how much each "
                "token flows into each position (head-averaged weights + identity, rows renormalised, multiplied)");
  return [o, &io] { run_dump(*o, io); };
}

}  // namespace attnviz
