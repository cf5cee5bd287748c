#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/error.h"
#include "core/engine/head_scores.h"

namespace attnviz {

namespace {

struct HeadsOptions {
  InputOptions in;
  int length = 0;
  uint64_t seed = 1;
  bool json = false;
};

void run_heads(const HeadsOptions& o, Io& io) {
  const bool given = (o.in.text_opt && o.in.text_opt->count()) || (o.in.tokens_opt && o.in.tokens_opt->count());
  Engine engine = open_engine(o.in, io.err);
  const Model& m = engine.model();
  std::vector<int> ids;
  std::string input;
  if (!given) {
    const int len = o.length ? o.length : std::min(40, engine.block_size() / 2);
    ids = repeated_random_tokens(m.tokenizer.get(), m.config.vocab_size, len, o.seed);
    input = "random string of " + std::to_string(ids.size() / 2) + " tokens, repeated twice";
  } else if (o.in.text_opt->count()) {
    ids = encode_text(m, o.in.text);
    input = "--text";
  } else {
    ids = parse_token_list(o.in.tokens);
    input = "--tokens";
  }
  if (static_cast<int>(ids.size()) > engine.block_size())
    io.err << "note: only the last " << engine.block_size() << " tokens are scored (block_size)\n";
  const Trace& tr = engine.run(ids);
  const auto scores = score_heads(tr);
  if (o.json) {
    nlohmann::json j = {{"model", o.in.model}, {"input", input}, {"tokens", tr.T()}, {"heads", nlohmann::json::array()}};
    if (m.tokenizer) j["text"] = m.tokenizer->decode(tr.tokens);
    for (const auto& s : scores)
      j["heads"].push_back({{"layer", s.layer}, {"head", s.head}, {"kv_head", m.config.kv_head_of(s.head)},
                            {"previous_token", s.previous_token}, {"induction", s.induction},
                            {"first_token", s.first_token}, {"self", s.self}, {"label", head_label(s)}});
    io.out << j.dump(2) << "\n";
    return;
  }
  io.out << "model " << o.in.model << ", input: " << input << " (" << tr.T() << " tokens)\n"
         << "mean attention weight on: prev = previous token, ind = token after the earlier occurrence of the "
            "current one, first = position 0, self = own position\n";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%5s %4s %3s %7s %7s %7s %7s  %s\n", "layer", "head", "kv", "prev", "ind", "first",
                "self", "label");
  io.out << buf;
  for (const auto& s : scores) {
    char ind[16];
    if (s.induction < 0) std::snprintf(ind, sizeof ind, "%7s", "-");
    else std::snprintf(ind, sizeof ind, "%7.3f", s.induction);
    std::snprintf(buf, sizeof buf, "%5d %4d %3d %7.3f %s %7.3f %7.3f  %s\n", s.layer, s.head,
                  m.config.kv_head_of(s.head), s.previous_token, ind, s.first_token, s.self, head_label(s).c_str());
    io.out << buf;
  }
}

}  // namespace

Action add_heads_command(CLI::App& app, Io& io) {
  auto o = std::make_shared<HeadsOptions>();
  auto* cmd = app.add_subcommand(
      "heads", "Score every attention head: previous-token, induction, first-token (sink) and self attention");
  add_input_options(cmd, o->in, true);
  cmd->add_option("--length", o->length,
                  "without --text/--tokens: length of the random string that is repeated twice (default "
                  "min(40, block_size/2))")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", o->seed, "seed of the random string (default 1)");
  cmd->add_flag("--json", o->json, "print JSON");
  return [o, &io] { run_heads(*o, io); };
}

}  // namespace attnviz
