// attnviz-cli's subcommands, one file each (cmd_*.cpp). Each add_*_command registers its
// options on `app` and returns the action that runs it; actions throw attnviz::Error.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/engine/engine.h"

namespace attnviz {

struct Io {
  std::ostream& out;
  std::ostream& err;
};
using Action = std::function<void()>;

Action add_info_command(CLI::App& app, Io& io);
Action add_dump_command(CLI::App& app, Io& io);
Action add_bench_command(CLI::App& app, Io& io);
Action add_random_command(CLI::App& app, Io& io);
Action add_train_command(CLI::App& app, Io& io);
Action add_eval_command(CLI::App& app, Io& io);
Action add_heads_command(CLI::App& app, Io& io);
Action add_export_command(CLI::App& app, Io& io);
Action add_tokenize_command(CLI::App& app, Io& io);
Action add_lens_command(CLI::App& app, Io& io);
Action add_patch_command(CLI::App& app, Io& io);
Action add_chat_command(CLI::App& app, Io& io);
Action add_models_command(CLI::App& app, Io& io);
Action add_qk_command(CLI::App& app, Io& io);
Action add_scan_command(CLI::App& app, Io& io);

// --model, [--text | --tokens], --backend, --block-size: what every command that runs a
// model on some input shares.
struct InputOptions {
  std::string model, text, tokens, chat, backend = "cpu";  // chat: --chat FILE.json
  std::string weights = "stored";  // --weights stored|f32 (LoadOptions)
  std::string arith;  // --arith f32|int8 (int8_product.h); empty: the process's (ATTNVIZ_ARITH, else f32)
  int block_size = 0;
  std::string ablate, ablate_mode = "zero";  // --ablate L:H,... and --ablate-mode, when registered
  CLI::Option* text_opt = nullptr;
  CLI::Option* tokens_opt = nullptr;
  CLI::Option* chat_opt = nullptr;
};
void add_input_options(CLI::App* cmd, InputOptions& o, bool with_input);
// --ablate and --ablate-mode (dump, export, eval): heads whose output is replaced.
void add_ablation_options(CLI::App* cmd, InputOptions& o);
// A subcommand that runs a model: --model, --backend, --block-size and --weights, plus
// --text/--tokens with kTextOrTokens and --ablate/--ablate-mode with kAblation.
enum InputKinds : unsigned { kModelOnly = 0, kTextOrTokens = 1, kAblation = 2 };
CLI::App* add_model_command(CLI::App& app, const std::string& name, const std::string& description, InputOptions& o,
                            unsigned kinds);

// Loads the model and opens the backend (printing a fallback note to `err`), sets the
// block size and the ablation (a usage Error for a bad --ablate list).
Engine open_engine(const InputOptions& o, std::ostream& err);
// open_engine, then runs the --text, --tokens or --chat input.
Engine run_input(const InputOptions& o, std::ostream& err);

// The text a model sees for a chat: the messages in FILE.json (a list of {"role",
// "content"}) rendered with the model's chat template (`template_file` overrides it), as
// transformers' apply_chat_template renders them. `bos`/`eos` override the model's tokens;
// `date` is what strftime_now sees (YYYY-MM-DD, empty: today).
struct ChatOptions {
  std::string template_file, date;
  std::optional<std::string> bos, eos;
  bool add_generation_prompt = true;
};
std::string render_chat_file(const std::string& model_path, const std::string& messages_file, const ChatOptions& o);
// The same for messages given as JSON (checked as a file's are; `where` names them in errors).
std::string render_chat_messages(const std::string& model_path, const nlohmann::ordered_json& messages,
                                 const std::string& where, const ChatOptions& o);

// What `info --json` prints of a model: sizes, parameter counts, weights, layer_specs (L).
nlohmann::json model_info_json(const Model& m);

// --weights stored|f32 as LoadOptions (a usage Error for anything else), and the option itself.
LoadOptions load_options(const std::string& weights);
void add_weights_option(CLI::App* cmd, std::string& weights);
// --arith f32|int8: sets the process's arithmetic (set_arith) for the products with `m`'s
// quantized matrices, with a note on `err` when the model has none it changes. Empty: as is.
void add_arith_option(CLI::App* cmd, std::string& arith);
void apply_arith(const std::string& arith, const Model& m, std::ostream& err);

// --position I, --target TOKEN | --target-ids A[,B] (heads --dla, patch): where a logit is
// read and of which token (or difference of two).
struct TargetOptions {
  int position = -1;  // −1: the last
  std::string target, target_ids;
  CLI::Option* target_opt = nullptr;
  CLI::Option* target_ids_opt = nullptr;
};
// Registers the three options; `when` starts each help line ("with --dla: ").
void add_target_options(CLI::App* cmd, TargetOptions& o, const std::string& when);
// The ids asked for (one, or A and B), empty when neither option was given (the predicted
// token then). Usage Errors: a --target that is not one token, a bad or out-of-vocabulary id.
std::vector<int> target_ids(const TargetOptions& o, const Model& m);
// --position against a text of T tokens (−1: the last); a usage Error outside it.
int target_position(const TargetOptions& o, int T);

// "3,1,4" → {3, 1, 4}; a usage Error for anything else.
std::vector<int> parse_token_list(const std::string& s);

}  // namespace attnviz
