#include "app/commands.h"
#include "core/engine/rollout.h"
#include "core/export/dump.h"

namespace attnviz {

namespace {

struct DumpOptions {
  InputOptions in;
  std::string out;
  bool rollout = false;
  std::string layers, heads, stages;  // selections: "" = all
};

void run_dump(const DumpOptions& o, Io& io) {
  DumpSelection sel;
  sel.stages = parse_stage_list(o.stages);  // stage names need no model: checked before it loads
  const Engine engine = run_input(o.in, io.err);
  const ModelConfig& c = engine.model().config;
  sel.layers = parse_index_list(o.layers, c.n_layer, "--layers");
  sel.heads = parse_index_list(o.heads, c.n_head, "--heads");
  const Tensor rollout = o.rollout ? attention_rollout_all(engine.trace()) : Tensor{};
  write_dump(engine.trace(), o.out,
             o.rollout ? std::vector<std::pair<std::string, const Tensor*>>{{"rollout", &rollout}}
                       : std::vector<std::pair<std::string, const Tensor*>>{},
             sel);
  const Trace& tr = engine.trace();
  io.err << "wrote " << o.out << ": " << tr.layers.size() << " layers, T=" << tr.T() << ", dropped " << tr.dropped
         << "\n";
}

}  // namespace

Action add_dump_command(CLI::App& app, Io& io) {
  auto o = std::make_shared<DumpOptions>();
  auto* cmd = add_model_command(app, "dump", "Run a model and write every recorded matrix to a safetensors file", o->in, kTextOrTokens | kAblation);
  cmd->add_option("--out", o->out, "output .safetensors file")->required();
  cmd->add_flag("--rollout", o->rollout,
                "also write `rollout` (L, T, T): attention rollout after each layer, an approximation of how much each "
                "token flows into each position (head-averaged weights + identity, rows renormalised, multiplied)");
  cmd->add_option("--layers", o->layers, "write only these layers: indices or ranges, e.g. 0,2-3 (default: all)");
  cmd->add_option("--heads", o->heads,
                  "write only these query heads (k and v: the KV heads they read), e.g. 1,4-5 (default: all)");
  cmd->add_option("--stages", o->stages, "write only these stages: q,k,v,scores,scaled,capped (soft-capping models),masked,probs,out,logits "
                  "(default: all of these), and resid (only when listed: layers.{l}.resid (T, C), the residual stream "
                  "entering layer l, and resid_final (T, C), after the last layer before the final norm; CPU backend)");
  return [o, &io] { run_dump(*o, io); };
}

}  // namespace attnviz
