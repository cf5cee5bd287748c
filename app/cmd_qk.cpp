// `qk`: why a head attends, one score split into query-side × key-side parts
// (core/engine/score_attribution.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "app/commands.h"
#include "core/engine/score_attribution.h"
#include "core/error.h"

namespace attnviz {

namespace {

struct QkOptions {
  InputOptions in;
  int layer = -1, head = -1, query = -1, key = -1;
  int top = 12;
  bool json = false;
};

void run_qk(const QkOptions& o, Io& io) {
  if (o.top < 1) throw Error("--top must be at least 1", ErrorKind::Usage);
  Engine engine = run_input(o.in, io.err);
  const Model& m = engine.model();
  const Trace& tr = engine.trace();
  const ScoreAttribution a = score_attribution(m, tr, o.layer, o.head, o.query, o.key);
  const int P = a.P();
  std::vector<std::string> names;
  for (const StreamPart& p : a.parts) names.push_back(part_name(p));
  if (o.json) {
    nlohmann::json terms = nlohmann::json::array();
    for (int x = 0; x < P; ++x) {
      nlohmann::json row = nlohmann::json::array();
      for (int y = 0; y < P; ++y) row.push_back(a.term(x, y));
      terms.push_back(std::move(row));
    }
    const nlohmann::json j = {{"layer", a.layer},   {"head", a.head},       {"kv_head", m.config.kv_head_of(a.layer, a.head)},
                              {"query", a.query},   {"key", a.key},         {"tokens", tr.tokens},
                              {"score", a.score},   {"parts", names},       {"terms", terms},
                              {"query_side", a.query_side}, {"key_side", a.key_side}, {"sum", a.sum}};
    io.out << j.dump(2) << "\n";
    return;
  }
  const auto piece = [&](int i) {
    return m.tokenizer ? "'" + m.tokenizer->piece(tr.tokens[static_cast<size_t>(i)]) + "'" : "#" + std::to_string(tr.tokens[static_cast<size_t>(i)]);
  };
  char buf[160];
  std::snprintf(buf, sizeof buf, "layer %d head %d: query %d %s, key %d %s: scaled score %.5f = sum of %d × %d terms %.5f\n",
                a.layer, a.head, a.query, piece(a.query).c_str(), a.key, piece(a.key).c_str(), a.score, P, P, a.sum);
  io.out << "model " << o.in.model << "\n" << buf
         << "every norm's scale frozen at its row; parts: what wrote the stream entering the layer\n";
  // The largest terms by |value|.
  std::vector<int> order(static_cast<size_t>(P) * P);
  std::iota(order.begin(), order.end(), 0);
  const int n = std::min<int>(o.top, static_cast<int>(order.size()));
  std::partial_sort(order.begin(), order.begin() + n, order.end(),
                    [&](int x, int y) { return std::abs(a.terms[static_cast<size_t>(x)]) > std::abs(a.terms[static_cast<size_t>(y)]); });
  io.out << "largest terms (query part × key part):\n";
  for (int r = 0; r < n; ++r) {
    const int t = order[static_cast<size_t>(r)];
    std::snprintf(buf, sizeof buf, "  %+10.5f  %-10s × %s\n", a.terms[static_cast<size_t>(t)],
                  names[static_cast<size_t>(t / P)].c_str(), names[static_cast<size_t>(t % P)].c_str());
    io.out << buf;
  }
  for (const bool query_side : {true, false}) {
    const std::vector<double>& side = query_side ? a.query_side : a.key_side;
    std::vector<int> po(static_cast<size_t>(P));
    std::iota(po.begin(), po.end(), 0);
    const int k = std::min(o.top, P);
    std::partial_sort(po.begin(), po.begin() + k, po.end(),
                      [&](int x, int y) { return std::abs(side[static_cast<size_t>(x)]) > std::abs(side[static_cast<size_t>(y)]); });
    io.out << (query_side ? "query side" : "key side") << " (each part summed over the other side):";
    for (int r = 0; r < k; ++r) {
      std::snprintf(buf, sizeof buf, " %s %+.4f", names[static_cast<size_t>(po[static_cast<size_t>(r)])].c_str(),
                    side[static_cast<size_t>(po[static_cast<size_t>(r)])]);
      io.out << (r ? "," : "") << buf;
    }
    io.out << "\n";
  }
}

}  // namespace

Action add_qk_command(CLI::App& app, Io& io) {
  auto o = std::make_shared<QkOptions>();
  auto* cmd = add_model_command(app, "qk",
      "Why a head attends: the scaled score of one head from a query to a key, split into what wrote the query "
      "side × what wrote the key side (embeddings, each earlier head, each MLP, the biases), every norm's scale "
      "frozen at its row",
      o->in, kTextOrTokens);
  cmd->add_option("--layer", o->layer, "the layer (a softmax-attention layer)")->required();
  cmd->add_option("--head", o->head, "the query head")->required();
  cmd->add_option("--query", o->query, "the query position i")->required();
  cmd->add_option("--key", o->key, "the key position j (j ≤ i, inside the layer's window)")->required();
  cmd->add_option("--top", o->top, "how many terms and parts to list (default 12; text output)");
  cmd->add_flag("--json", o->json, "print JSON: score, parts, terms [P][P], query_side, key_side, sum");
  return [o, &io] { run_qk(*o, io); };
}

}  // namespace attnviz
