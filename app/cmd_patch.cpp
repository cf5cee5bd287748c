// `patch`: activation patching, prompt B's activations put into a run of prompt A one head
// (or one layer and position of the residual stream) at a time (core/engine/patch.h).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/engine/int8_product.h"
#include "core/engine/patch.h"
#include "core/error.h"

namespace attnviz {

namespace {

struct PatchOptions {
  InputOptions in;              // --model, --text (A), --tokens (A), --block-size, --weights
  std::string other, other_tokens;  // B
  CLI::Option* other_opt = nullptr;
  CLI::Option* other_tokens_opt = nullptr;
  bool heads = false, resid = false, json = false;
  TargetOptions target;
};

bool given(const CLI::Option* opt) { return opt && opt->count() > 0; }

void run_patch(const PatchOptions& o, Io& io) {
  if (o.heads == o.resid) throw Error("give one of --heads and --resid", ErrorKind::Usage);
  const bool text = given(o.in.text_opt), tokens = given(o.in.tokens_opt);
  if (text != given(o.other_opt) || tokens != given(o.other_tokens_opt) || text == tokens)
    throw Error("give the two prompts as --text A --other B, or as --tokens … --other-tokens …", ErrorKind::Usage);
  if (o.in.backend != "cpu")
    throw Error("activation patching runs on the CPU backend only\n  HINT: run with --backend cpu.");
  if (!o.in.arith.empty()) parse_arith(o.in.arith, "--arith");
  const auto model = load_model(o.in.model, load_options(o.in.weights));
  const Model& m = *model;
  apply_arith(o.in.arith, m, io.err);
  for (const std::string& w : m.warnings) io.err << format_message("warning", w);
  PatchRequest req;
  req.kind = o.heads ? PatchKind::Heads : PatchKind::Resid;
  req.target_ids = target_ids(o.target, m);
  std::vector<int> a = text ? encode_text(m, o.in.text) : parse_token_list(o.in.tokens);
  std::vector<int> b = text ? encode_text(m, o.other) : parse_token_list(o.other_tokens);
  const int block = o.in.block_size ? o.in.block_size : m.config.n_ctx;
  if (block > m.config.n_ctx)
    throw Error("--block-size " + std::to_string(block) + " is out of range: the model takes 1 … " +
                    std::to_string(m.config.n_ctx) + " tokens",
                ErrorKind::Usage);
  if (a.size() == b.size() && static_cast<int>(a.size()) > block) {  // the window, as the engine crops it
    io.err << "note: only the last " << block << " tokens of each prompt are run (block_size)\n";
    a.erase(a.begin(), a.end() - block);
    b.erase(b.begin(), b.end() - block);
  }
  if (a.size() == b.size() && !a.empty()) req.position = target_position(o.target, static_cast<int>(a.size()));
  const PatchResult r = activation_patching(m, a, b, req);

  const char* grid_name = o.heads ? "heads" : "resid";
  if (o.json) {
    const nlohmann::json j = {{"metric", r.metric}, {"position", r.position}, {"target_ids", r.target_ids},
                              {"clean", r.clean},   {"other", r.other},       {grid_name, r.grid},
                              {"passes", r.passes}};
    io.out << j.dump(2) << "\n";
    return;
  }
  const auto name = [&](int id) { return m.tokenizer ? "'" + m.tokenizer->piece(id) + "'" : "#" + std::to_string(id); };
  io.out << "model " << o.in.model << ", " << a.size() << " tokens: " << r.metric << " of " << name(r.target_ids[0]);
  if (r.target_ids.size() > 1) io.out << " minus " << name(r.target_ids[1]);
  char buf[96];
  std::snprintf(buf, sizeof buf, " at position %d: clean (A) %.5f, other (B) %.5f\n", r.position, r.clean, r.other);
  io.out << buf << "the metric on A with " << (o.heads ? "one head's output" : "the stream entering a layer at one position")
         << " taken from B; rows = layers, columns = " << (o.heads ? "heads" : "positions") << "\n     ";
  for (size_t col = 0; col < r.grid[0].size(); ++col)
    std::snprintf(buf, sizeof buf, " %9s", ((o.heads ? "H" : "t") + std::to_string(col)).c_str()), io.out << buf;
  for (size_t l = 0; l < r.grid.size(); ++l) {
    std::snprintf(buf, sizeof buf, "\n L%-3zu", l);
    io.out << buf;
    for (double v : r.grid[l]) std::snprintf(buf, sizeof buf, " %+9.4f", v), io.out << buf;
  }
  io.out << "\n";
}

}  // namespace

Action add_patch_command(CLI::App& app, Io& io) {
  auto o = std::make_shared<PatchOptions>();
  auto* cmd = app.add_subcommand(
      "patch",
      "Activation patching: the logit (or logit difference) at one position of prompt A when one head's output, or "
      "the residual stream entering one layer at one position, is taken from prompt B's run");
  add_input_options(cmd, o->in, true);
  o->other_opt = cmd->add_option("--other", o->other, "prompt B as text, with --text A (the same number of tokens)");
  o->other_tokens_opt =
      cmd->add_option("--other-tokens", o->other_tokens, "prompt B as token ids, with --tokens (the same number)");
  o->other_opt->excludes(o->other_tokens_opt);
  cmd->add_flag("--heads", o->heads, "the grid over layers × heads: each head's output at every position from B");
  cmd->add_flag("--resid", o->resid,
                "the grid over layers × positions: the residual stream entering the layer at that position from B");
  add_target_options(cmd, o->target, "");
  cmd->add_flag("--json", o->json, "print JSON");
  return [o, &io] { run_patch(*o, io); };
}

}  // namespace attnviz
