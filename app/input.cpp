#include <limits>
#include <sstream>

#include "app/commands.h"
#include "core/error.h"
#include "core/limits.h"

namespace attnviz {

std::vector<int> parse_token_list(const std::string& s) {
  std::vector<int> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < INT32_MIN || v > INT32_MAX)
      throw Error("--tokens: '" + excerpt(item) + "' is not an integer token id (expected a list like 1,2,3)", ErrorKind::Usage);
    ids.push_back(static_cast<int>(v));
  }
  return ids;
}

LoadOptions load_options(const std::string& weights) {
  LoadOptions opt;
  if (weights == "f32") opt.weights = WeightsMode::F32;
  else if (weights != "stored")
    throw Error("--weights: '" + excerpt(weights) + "' is not stored or f32", ErrorKind::Usage);
  return opt;
}

void add_weights_option(CLI::App* cmd, std::string& weights) {
  cmd->add_option("--weights", weights,
                  "stored (default: matrices used where the file stores them, quantized or F16/BF16) or f32 (every "
                  "matrix converted to float32 on load)");
}

void add_input_options(CLI::App* cmd, InputOptions& o, bool with_input) {
  cmd->add_option("--model", o.model, "model directory (config.json + model.safetensors), FILE.gguf, builtin:NAME, ollama:NAME[:TAG] or hf:ORG/NAME[@REV]")->required();
  if (with_input) {
    o.text_opt = cmd->add_option("--text", o.text, "text to run (needs the model's tokenizer)");
    o.tokens_opt = cmd->add_option("--tokens", o.tokens, "token ids to run, e.g. 1,2,3");
    o.text_opt->excludes(o.tokens_opt);
  }
  cmd->add_option("--backend", o.backend, "cpu or gpu (falls back to the CPU, saying why, when the GPU cannot run)");
  cmd->add_option("--block-size", o.block_size,
                  "context window: only the last N tokens are seen (default: the model's context)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  add_weights_option(cmd, o.weights);
}

void add_ablation_options(CLI::App* cmd, InputOptions& o) {
  cmd->add_option("--ablate", o.ablate,
                  "heads to switch off, layer:head pairs, e.g. 0:1,1:4: their output is replaced before the output "
                  "projection");
  cmd->add_option("--ablate-mode", o.ablate_mode,
                  "zero (the head's output set to 0, default) or mean (its mean over the window's positions)");
}

CLI::App* add_model_command(CLI::App& app, const std::string& name, const std::string& description, InputOptions& o,
                            unsigned kinds) {
  CLI::App* cmd = app.add_subcommand(name, description);
  add_input_options(cmd, o, (kinds & kTextOrTokens) != 0);
  if (kinds & kAblation) add_ablation_options(cmd, o);
  return cmd;
}

Engine open_engine(const InputOptions& o, std::ostream& err) {
  auto model = load_model(o.model, load_options(o.weights));
  std::string note;
  Engine engine(model, make_backend(o.backend, &note));
  if (!note.empty()) err << "note: " << note << "\n";
  for (const std::string& w : model->warnings) err << "warning: " << w << "\n";
  if (o.block_size) engine.set_block_size(o.block_size);
  engine.set_ablation(parse_ablation(o.ablate, o.ablate_mode, engine.model().config));
  return engine;
}

Engine run_input(const InputOptions& o, std::ostream& err) {
  const bool text = o.text_opt && o.text_opt->count() > 0, tokens = o.tokens_opt && o.tokens_opt->count() > 0;
  if (!text && !tokens) throw Error("give the input with --text S or --tokens 1,2,3", ErrorKind::Usage);
  Engine engine = open_engine(o, err);
  engine.run(text ? encode_text(engine.model(), o.text) : parse_token_list(o.tokens));
  return engine;
}

}  // namespace attnviz
