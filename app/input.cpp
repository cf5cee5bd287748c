#include <functional>
#include <limits>
#include <sstream>

#include "app/commands.h"
#include "core/chat/jinja.h"
#include "core/engine/int8_product.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"
#include "core/model/chat_source.h"
#include "core/model/paths.h"

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

void add_arith_option(CLI::App* cmd, std::string& arith) {
  cmd->add_option("--arith", arith,
                  "products with quantized weights: f32 (default: each weight decoded to float32, exact) or int8 (the "
                  "activations quantized to int8 per block, integer dot products: faster, llama.cpp's arithmetic)");
}

void apply_arith(const std::string& arith, const Model& m, std::ostream& err) {
  if (arith.empty()) return;
  const Arith a = parse_arith(arith, "--arith");
  set_arith(a);
  if (a == Arith::Int8 && arith_for(m.weights, a) != Arith::Int8)
    err << "note: --arith int8 changes nothing for " << m.name
        << ": none of its matrices is stored as Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K, the types "
           "with integer products (float32 products throughout)\n";
}

void add_input_options(CLI::App* cmd, InputOptions& o, bool with_input) {
  cmd->add_option("--model", o.model, "model directory (config.json + model.safetensors), FILE.gguf, builtin:NAME, ollama:NAME[:TAG] or hf:ORG/NAME[@REV]")->required();
  if (with_input) {
    o.text_opt = cmd->add_option("--text", o.text, "text to run (needs the model's tokenizer)");
    o.tokens_opt = cmd->add_option("--tokens", o.tokens, "token ids to run, e.g. 1,2,3");
    o.chat_opt = cmd->add_option("--chat", o.chat,
                                 "a chat to run: FILE.json, a list of {\"role\", \"content\"} messages rendered with the "
                                 "model's chat template (attnviz-cli chat prints the text)");
    o.text_opt->excludes(o.tokens_opt);
    o.chat_opt->excludes(o.text_opt)->excludes(o.tokens_opt);
  }
  cmd->add_option("--backend", o.backend, "cpu or gpu (falls back to the CPU, saying why, when the GPU cannot run)");
  cmd->add_option("--block-size", o.block_size,
                  "context window: only the last N tokens are seen (default: the model's context)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  add_weights_option(cmd, o.weights);
  add_arith_option(cmd, o.arith);
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
  if (!o.arith.empty()) parse_arith(o.arith, "--arith");  // a usage error before the model loads
  auto model = load_model(o.model, load_options(o.weights));
  apply_arith(o.arith, *model, err);
  std::string note;
  Engine engine(model, make_backend(o.backend, &note));
  if (!note.empty()) err << format_message("note", note);
  for (const std::string& w : model->warnings) err << format_message("warning", w);
  if (o.block_size) engine.set_block_size(o.block_size);
  engine.set_ablation(parse_ablation(o.ablate, o.ablate_mode, engine.model().config));
  return engine;
}

Engine run_input(const InputOptions& o, std::ostream& err) {
  const bool text = o.text_opt && o.text_opt->count() > 0, tokens = o.tokens_opt && o.tokens_opt->count() > 0;
  const bool chat = o.chat_opt && o.chat_opt->count() > 0;
  if (!text && !tokens && !chat) throw Error("give the input with --text S, --tokens 1,2,3 or --chat FILE.json", ErrorKind::Usage);
  Engine engine = open_engine(o, err);
  if (chat) {  // the template writes the special tokens itself: none added (apply_chat_template's encode)
    const std::string rendered = render_chat_file(engine.model().dir, o.chat, {});
    const Model& m = engine.model();
    if (!m.tokenizer) encode_text(m, rendered);  // throws, saying why the model has no tokenizer
    engine.run(m.tokenizer->encode_with(rendered, /*add_special=*/false));
  } else {
    engine.run(text ? encode_text(engine.model(), o.text) : parse_token_list(o.tokens));
  }
  return engine;
}

namespace {

// The template is found (and its absence reported) before the messages are read.
std::string render_chat_with(const std::string& model_path, const ChatOptions& o,
                             const std::function<nlohmann::ordered_json()>& read_messages) {
  ModelChat mc;
  if (!model_path.empty()) mc = read_model_chat(resolve_model_dir(model_path));
  if (!o.template_file.empty()) {
    mc.template_text = read_regular_file(o.template_file, kMaxTemplateBytes, "chat template", /*allow_nul=*/false);
    mc.where = "'" + excerpt(o.template_file, kPathExcerptBytes) + "'";
    if (mc.template_text.empty())
      throw Error("the chat template " + mc.where +
                  " (--template) is empty\n  HINT: pass a file holding a Jinja template.");
  }
  const std::string hint =
      "`attnviz-cli chat --template FILE.jinja --messages FILE.json` renders with a template of your choice; pass its "
      "text with --text.";
  if (mc.template_text.empty()) render_model_chat(mc, model_path, {}, {}, hint);  // throws: no template
  const nlohmann::ordered_json messages = read_messages();  // checked
  ChatRenderOptions r;
  r.add_generation_prompt = o.add_generation_prompt;
  r.bos_token = o.bos;
  r.eos_token = o.eos;
  r.date = o.date;
  return render_model_chat(mc, model_path, messages, r, hint);
}

}  // namespace

std::string render_chat_file(const std::string& model_path, const std::string& messages_file, const ChatOptions& o) {
  return render_chat_with(model_path, o, [&] { return read_chat_messages(messages_file); });
}

std::string render_chat_messages(const std::string& model_path, const nlohmann::ordered_json& messages,
                                 const std::string& where, const ChatOptions& o) {
  return render_chat_with(model_path, o, [&] {
    check_chat_messages(messages, where);
    return messages;
  });
}

}  // namespace attnviz
