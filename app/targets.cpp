// --position, --target and --target-ids, shared by `heads --dla` and `patch`.
#include "app/commands.h"
#include "core/error.h"

namespace attnviz {

void add_target_options(CLI::App* cmd, TargetOptions& o, const std::string& when) {
  cmd->add_option("--position", o.position, when + "the position (default: the last)");
  o.target_opt = cmd->add_option("--target", o.target,
                                 when + "the target token, as text (one token of the model's tokenizer; default: the "
                                        "predicted token)");
  o.target_ids_opt =
      cmd->add_option("--target-ids", o.target_ids, when + "the target id A, or A,B for the logit of A minus that of B");
  o.target_opt->excludes(o.target_ids_opt);
}

std::vector<int> target_ids(const TargetOptions& o, const Model& m) {
  std::vector<int> ids;
  if (o.target_opt && o.target_opt->count()) {
    if (!m.tokenizer) encode_text(m, o.target);  // throws, saying why there is no tokenizer
    ids = m.tokenizer->encode_with(o.target, false);
    if (ids.size() != 1)
      throw Error("--target '" + o.target + "' is " + std::to_string(ids.size()) +
                      " tokens for this model's tokenizer, not one\n  HINT: pass the id with --target-ids.",
                  ErrorKind::Usage);
  } else if (o.target_ids_opt && o.target_ids_opt->count()) {
    ids = parse_token_list(o.target_ids);
    if (ids.empty() || ids.size() > 2)
      throw Error("--target-ids takes one id or two (A,B: the logit of A minus that of B)", ErrorKind::Usage);
  }
  for (int id : ids)
    if (id < 0 || id >= m.config.vocab_size)
      throw Error("target id " + std::to_string(id) + " is outside the vocabulary (0 … " +
                      std::to_string(m.config.vocab_size - 1) + ")",
                  ErrorKind::Usage);
  return ids;
}

int target_position(const TargetOptions& o, int T) {
  const int position = o.position < 0 ? T - 1 : o.position;
  if (o.position < -1 || position >= T)
    throw Error("--position " + std::to_string(o.position) + " is outside the text (" + std::to_string(T) +
                    " tokens: 0 … " + std::to_string(T - 1) + ")",
                ErrorKind::Usage);
  return position;
}

}  // namespace attnviz
