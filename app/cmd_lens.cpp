// `lens`: the logit lens, what the model predicts after each layer at each position
// (core/engine/lens.h).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "app/commands.h"
#include "core/engine/lens.h"
#include "core/error.h"

namespace attnviz {

namespace {

struct LensOptions {
  InputOptions in;
  int top = 5;
  bool json = false;
};

std::string label(const Model& m, int id) {
  return m.tokenizer ? m.tokenizer->piece(id) : "#" + std::to_string(id);
}

void run_lens(const LensOptions& o, Io& io) {
  if (o.top < 1) throw Error("--top must be at least 1", ErrorKind::Usage);
  Engine engine = run_input(o.in, io.err);
  const Model& m = engine.model();
  const Trace& tr = engine.trace();
  const int L = m.config.n_layer, T = tr.T();
  std::vector<int> positions(static_cast<size_t>(T));
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<std::vector<LensCell>> grid;  // [L][T]
  for (int l = 0; l < L; ++l) grid.push_back(logit_lens(m, tr, l, positions, o.top));
  if (o.json) {
    nlohmann::json ids = nlohmann::json::array(), probs = nlohmann::json::array(), next_prob = nlohmann::json::array(),
                   next_rank = nlohmann::json::array();
    for (const auto& layer : grid) {
      nlohmann::json li = nlohmann::json::array(), lp = nlohmann::json::array(), np = nlohmann::json::array(),
                     nr = nlohmann::json::array();
      for (int i = 0; i < T; ++i) {
        const LensCell& cell = layer[static_cast<size_t>(i)];
        li.push_back(cell.top_ids);
        lp.push_back(cell.top_probs);
        if (i + 1 < T) np.push_back(cell.next_prob), nr.push_back(cell.next_rank);
      }
      ids.push_back(li), probs.push_back(lp), next_prob.push_back(np), next_rank.push_back(nr);
    }
    const nlohmann::json j = {{"layers", L},          {"positions", T},          {"tokens", tr.tokens},
                              {"top_ids", ids},       {"top_probs", probs},      {"next_prob", next_prob},
                              {"next_rank", next_rank}};
    io.out << j.dump(2) << "\n";
    return;
  }
  io.out << "model " << o.in.model << ", " << T << " tokens, " << L
         << " layers: the top token after each layer (its probability), and the rank of the token that comes "
            "next (r0 = top)\n";
  char buf[96];
  for (int i = 0; i < T; ++i) {
    io.out << "position " << i << " '" << label(m, tr.tokens[static_cast<size_t>(i)]) << "'";
    if (i + 1 < T) io.out << " → next '" << label(m, tr.tokens[static_cast<size_t>(i + 1)]) << "'";
    io.out << "\n";
    for (int l = 0; l < L; ++l) {
      const LensCell& cell = grid[static_cast<size_t>(l)][static_cast<size_t>(i)];
      std::snprintf(buf, sizeof buf, "  L%-3d %6.3f ", l, cell.top_probs[0]);
      io.out << buf << "'" << label(m, cell.top_ids[0]) << "'";
      if (cell.next_rank >= 0) {
        std::snprintf(buf, sizeof buf, "  next p=%.4f r%d", cell.next_prob, cell.next_rank);
        io.out << buf;
      }
      io.out << "\n";
    }
  }
}

}  // namespace

Action add_lens_command(CLI::App& app, Io& io) {
  auto o = std::make_shared<LensOptions>();
  auto* cmd = add_model_command(app, "lens",
      "The logit lens: the residual stream after each layer through the final norm and the unembedding, per "
      "position: the top tokens and the probability and rank of the token that comes next", o->in, kTextOrTokens);
  cmd->add_option("--top", o->top, "tokens listed per layer and position (default 5)");
  cmd->add_flag("--json", o->json, "print JSON");
  return [o, &io] { run_lens(*o, io); };
}

}  // namespace attnviz
