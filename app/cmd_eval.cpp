#include <cmath>
#include <iomanip>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/error.h"
#include "core/limits.h"
#include "core/engine/importance.h"

namespace attnviz {

namespace {

struct EvalOptions {
  InputOptions in;
  std::string file;
  int stride = 0;
  bool json = false;
};

void run_eval(const EvalOptions& o, Io& io) {
  Engine engine = open_engine(o.in, io.err);
  // eval reads the logits alone: no per-head summaries and no (T, T) matrices are recorded
  // (the CPU backend computes each head's in blocks it does not keep; the same numbers).
  engine.set_summaries(false);
  engine.set_matrices(Engine::Matrices::kRecompute);
  // A regular file of at most kMaxTextBytes, opened without blocking (no FIFOs, no /dev/zero).
  const std::string text = read_regular_file(o.file, kMaxTextBytes, "--text-file");
  const std::vector<int> ids = encode_text(engine.model(), text);
  const int n = static_cast<int>(ids.size()), bs = engine.block_size(), V = engine.model().config.vocab_size;
  if (n < 2) throw Error(excerpt(o.file, kPathExcerptBytes) + ": needs at least 2 tokens to score a next-token prediction");
  // Every window after the first scores the tokens it added, each predicted from the one
  // before it, which must still be in the window: so stride ≤ block_size − 1.
  if (bs < 2)
    throw Error("eval needs a block size of at least 2 (a token to predict from and one to predict)",
                ErrorKind::Usage);
  if (o.stride >= bs)
    throw Error("--stride " + std::to_string(o.stride) + " must be smaller than the block size (" +
                    std::to_string(bs) + ")",
                ErrorKind::Usage);
  const int stride = o.stride ? o.stride : std::max(1, bs / 2);
  // Window [begin, end) scores the targets [scored, end): each token is predicted from
  // up to block_size tokens before it, at least block_size - stride once the text is long.
  double sum = 0;
  long long count = 0;
  int scored = 1, end = std::min(n, bs);
  while (true) {
    const int begin = std::max(0, end - bs);
    const std::vector<int> window(ids.begin() + begin, ids.begin() + end);
    const Trace& tr = engine.run(window);
    for (int g = scored; g < end; ++g) {
      sum += next_token_loss(tr.logits.data.data() + static_cast<size_t>(g - 1 - begin) * V, V, ids[g]);
      ++count;
    }
    scored = end;
    if (end == n) break;
    end = std::min(n, end + stride);
  }
  const double loss = sum / static_cast<double>(count);
  nlohmann::json j = {{"model", o.in.model}, {"text_file", o.file}, {"tokens", count},
                      {"loss_nats", loss}, {"bits_per_token", loss / std::log(2.0)},
                      {"perplexity", std::exp(loss)}, {"block_size", bs}, {"stride", stride},
                      {"backend", engine.backend().name()}};
  if (!engine.ablation().empty()) {  // the loss of the ablated model
    j["ablate"] = engine.ablation().to_string();
    j["ablate_mode"] = ablation_mode_name(engine.ablation().mode);
  }
  if (o.json) {
    io.out << j.dump() << "\n";
    return;
  }
  io.out << std::fixed << std::setprecision(4) << o.in.model << " on " << o.file << ": " << count
         << " tokens scored, loss " << loss << " nats/token = " << j["bits_per_token"].get<double>()
         << " bits/token, perplexity " << j["perplexity"].get<double>() << " (block_size " << bs << ", stride "
         << stride << ")";
  if (!engine.ablation().empty())
    io.out << ", heads " << engine.ablation().to_string() << " ablated (" << ablation_mode_name(engine.ablation().mode)
           << ")";
  io.out << "\n";
}

}  // namespace

Action add_eval_command(CLI::App& app, Io& io) {
  auto o = std::make_shared<EvalOptions>();
  auto* cmd = add_model_command(app, "eval", "Mean next-token loss of a model over a text file, in sliding windows of block_size", o->in, kAblation);
  cmd->add_option("--text-file", o->file, "UTF-8 text to score")->required();
  cmd->add_option("--stride", o->stride,
                  "tokens the window moves each time (default block_size/2; 1 = every token sees a full window)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json, "print one JSON object");
  return [o, &io] { run_eval(*o, io); };
}

}  // namespace attnviz
