#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/error.h"
#include "core/engine/composition.h"
#include "core/engine/head_scores.h"
#include "core/engine/importance.h"
#include "core/engine/lens.h"

namespace attnviz {

namespace {

struct HeadsOptions {
  InputOptions in;
  int length = 0;
  uint64_t seed = 1;
  bool json = false, importance = false, dla = false, composition = false;
  TargetOptions target;  // --position, --target, --target-ids (with --dla)
};

// `heads --dla`: the direct logit attribution at one position (core/engine/lens.h).
void print_dla(const HeadsOptions& o, Engine& engine, const std::vector<int>& ids, Io& io) {
  const Model& m = engine.model();
  std::vector<int> targets = target_ids(o.target, m);  // checked before the run
  const Trace& tr = engine.run(ids);
  const int position = target_position(o.target, tr.T());
  if (targets.empty()) targets = {predicted_token(m, tr, position)};
  const Attribution a = direct_logit_attribution(m, tr, position, targets);
  if (o.json) {
    nlohmann::json j = {{"position", a.position}, {"target_ids", a.target_ids}, {"logit", a.logit},
                        {"heads", a.heads},       {"mlp", a.mlp},               {"embed", a.embed},
                        {"rest", a.rest},         {"sum", a.sum},               {"norm_scale", a.norm_scale}};
    // A hybrid: heads[l] holds layer l's own heads (none for a convolution layer), whose
    // output is conv[l].
    if (m.config.short_conv_kernel > 0) j["conv"] = a.conv;
    io.out << j.dump(2) << "\n";
    return;
  }
  const auto name = [&](int id) { return m.tokenizer ? "'" + m.tokenizer->piece(id) + "'" : "#" + std::to_string(id); };
  io.out << "model " << o.in.model << ": direct logit attribution at position " << a.position << " of " << tr.T()
         << ", logit of " << name(a.target_ids[0]);
  if (a.target_ids.size() > 1) io.out << " minus " << name(a.target_ids[1]);
  char buf[64];
  std::snprintf(buf, sizeof buf, " = %.5f", a.logit);
  io.out << buf << "\nthe final norm's scale frozen at the run's value (" << a.norm_scale
         << "); rows = layers, columns = heads, then the layer's MLP\n     ";
  size_t cols = 0;  // a hybrid's linear layers may have more heads than its softmax layers
  for (const auto& hs : a.heads) cols = std::max(cols, hs.size());
  for (size_t h = 0; h < cols; ++h) std::snprintf(buf, sizeof buf, " %9s", ("H" + std::to_string(h)).c_str()), io.out << buf;
  std::snprintf(buf, sizeof buf, " %9s\n", "MLP");
  io.out << buf;
  for (size_t l = 0; l < a.heads.size(); ++l) {
    std::snprintf(buf, sizeof buf, " L%-3zu", l);
    io.out << buf;
    for (double v : a.heads[l]) std::snprintf(buf, sizeof buf, " %+9.4f", v), io.out << buf;
    for (size_t h = a.heads[l].size(); h < cols; ++h) io.out << std::string(10, ' ');  // a layer with fewer heads
    std::snprintf(buf, sizeof buf, " %+9.4f", a.mlp[l]);
    io.out << buf;
    if (m.config.layer(static_cast<int>(l)).mixer == Mixer::ShortConv)
      std::snprintf(buf, sizeof buf, "  (convolution %+.4f)", a.conv[l]), io.out << buf;
    io.out << "\n";
  }
  std::snprintf(buf, sizeof buf, "embed %+.5f, rest (biases) %+.5f, sum %.5f\n", a.embed, a.rest, a.sum);
  io.out << buf;
}

// `heads --composition`: Q-, K- and V-composition between every pair of heads in different
// layers, from the weights (core/engine/composition.h).
void print_composition(const HeadsOptions& o, const Model& m, Io& io) {
  const Composition comp = head_composition(m);
  const int L = comp.L, H = comp.H;
  const auto grid = [&](const std::vector<float>& s) {  // [L][H][L][H]
    nlohmann::json g = nlohmann::json::array();
    for (int l1 = 0; l1 < L; ++l1) {
      nlohmann::json a = nlohmann::json::array();
      for (int h1 = 0; h1 < H; ++h1) {
        nlohmann::json b = nlohmann::json::array();
        for (int l2 = 0; l2 < L; ++l2) {
          nlohmann::json row = nlohmann::json::array();
          for (int h2 = 0; h2 < H; ++h2) row.push_back(comp.at(s, l1, h1, l2, h2));
          b.push_back(std::move(row));
        }
        a.push_back(std::move(b));
      }
      g.push_back(std::move(a));
    }
    return g;
  };
  if (o.json) {
    const nlohmann::json j = {{"model", o.in.model}, {"layers", L}, {"n_head", H},
                              {"q", grid(comp.q)},   {"k", grid(comp.k)}, {"v", grid(comp.v)}};
    io.out << j.dump() << "\n";
    return;
  }
  struct Edge {
    float v;
    char kind;
    int l1, h1, l2, h2;
  };
  std::vector<Edge> edges;
  for (int l1 = 0; l1 < L; ++l1)
    for (int h1 = 0; h1 < H; ++h1)
      for (int l2 = l1 + 1; l2 < L; ++l2)
        for (int h2 = 0; h2 < H; ++h2)
          for (const auto& [kind, s] : {std::pair<char, const std::vector<float>*>{'Q', &comp.q}, {'K', &comp.k}, {'V', &comp.v}})
            edges.push_back({comp.at(*s, l1, h1, l2, h2), kind, l1, h1, l2, h2});
  const size_t n = std::min<size_t>(20, edges.size());
  std::partial_sort(edges.begin(), edges.begin() + static_cast<std::ptrdiff_t>(n), edges.end(),
                    [](const Edge& a, const Edge& b) { return a.v > b.v; });
  io.out << "model " << o.in.model << ": composition between heads (Elhage et al. 2021), ‖A·B‖_F / (‖A‖_F·‖B‖_F) "
            "from the weights, the input norms' weights folded in, RoPE left out\n"
         << "the " << n << " strongest pairs:\n";
  char buf[96];
  for (size_t r = 0; r < n; ++r) {
    const Edge& e = edges[r];
    std::snprintf(buf, sizeof buf, "  %c  L%dH%d → L%dH%d  %.4f\n", e.kind, e.l1, e.h1, e.l2, e.h2, e.v);
    io.out << buf;
  }
}

// `heads --importance`: the loss change of each head ablated alone, as L × H grids.
void print_importance(const HeadsOptions& o, Engine& engine, const std::vector<int>& ids, const std::string& input,
                      Io& io) {
  const ImportanceGrid g = head_importance(engine, ids);
  const ModelConfig& c = engine.model().config;
  if (o.json) {
    nlohmann::json j = {{"model", o.in.model}, {"input", input}, {"tokens", g.targets + 1},
                        {"targets", g.targets}, {"base_loss_nats", g.base_loss},
                        {"layers", c.n_layer}, {"n_head", c.n_head}, {"heads", nlohmann::json::array()}};
    nlohmann::json zero = nlohmann::json::array(), mean = nlohmann::json::array();
    for (const auto& h : g.heads) {
      j["heads"].push_back({{"layer", h.layer}, {"head", h.head}, {"kv_head", c.kv_head_of(h.layer, h.head)},
                            {"zero", h.zero}, {"mean", h.mean}});
      if (h.head == 0) zero.push_back(nlohmann::json::array()), mean.push_back(nlohmann::json::array());
      zero.back().push_back(h.zero), mean.back().push_back(h.mean);
    }
    j["grid_zero"] = zero;  // (L, H)
    j["grid_mean"] = mean;  // (L, H)
    io.out << j.dump(2) << "\n";
    return;
  }
  io.out << "model " << o.in.model << ", input: " << input << " (" << g.targets << " next-token predictions)\n"
         << "clean loss " << g.base_loss << " nats; loss change (nats) with one head ablated, rows = layers, "
         << "columns = heads\n";
  char buf[32];
  for (const bool zero : {true, false}) {
    io.out << (zero ? "zero:\n" : "mean:\n") << "     ";
    for (int h = 0; h < c.n_head; ++h) std::snprintf(buf, sizeof buf, " %8s", ("H" + std::to_string(h)).c_str()), io.out << buf;
    for (const auto& h : g.heads) {
      if (h.head == 0) std::snprintf(buf, sizeof buf, "\n L%-3d", h.layer), io.out << buf;
      std::snprintf(buf, sizeof buf, " %+8.4f", zero ? h.zero : h.mean);
      io.out << buf;
    }
    io.out << "\n";
  }
}

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
  if (o.importance + o.dla + o.composition > 1)
    throw Error("--importance, --dla and --composition are separate views: give one", ErrorKind::Usage);
  if (o.composition) return print_composition(o, m, io);
  if (o.dla) return print_dla(o, engine, ids, io);
  if (o.importance) {  // ablation switches softmax heads off; a hybrid's other layers have none to switch
    m.config.require_softmax_only("heads --importance");
    return print_importance(o, engine, ids, input, io);
  }
  if (m.config.any_linear())
    io.err << "note: scores are for the softmax layers' heads; linear-attention and convolution layers have no "
              "attention distribution to score\n";
  const Trace& tr = engine.run(ids);
  const auto scores = score_heads(tr);
  if (o.json) {
    nlohmann::json j = {{"model", o.in.model}, {"input", input}, {"tokens", tr.T()}, {"heads", nlohmann::json::array()}};
    if (m.tokenizer) j["text"] = m.tokenizer->decode(tr.tokens);
    for (const auto& s : scores) {
      j["heads"].push_back({{"layer", s.layer}, {"head", s.head}, {"kv_head", m.config.kv_head_of(s.layer, s.head)},
                            {"previous_token", s.previous_token}, {"induction", s.induction},
                            {"first_token", s.first_token}, {"self", s.self}, {"label", head_label(s)},
                            {"entropy_bits", s.entropy_bits}, {"mean_distance", s.mean_distance},
                            {"sink", s.first_token}, {"diagonal", s.self}});
      if (s.sink_mass >= 0) j["heads"].back()["sink_mass"] = s.sink_mass;  // GPT-OSS's learned sink
    }
    io.out << j.dump(2) << "\n";
    return;
  }
  io.out << "model " << o.in.model << ", input: " << input << " (" << tr.T() << " tokens)\n"
         << "mean attention weight on: prev = previous token, ind = token after the earlier occurrence of the "
            "current one, first = position 0, self = own position; entropy of the rows in bits, dist = mean "
            "Σ p·(i − j)\n";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%5s %4s %3s %7s %7s %7s %7s %7s %7s  %s\n", "layer", "head", "kv", "prev", "ind",
                "first", "self", "entropy", "dist", "label");
  io.out << buf;
  for (const auto& s : scores) {
    char ind[16];
    if (s.induction < 0) std::snprintf(ind, sizeof ind, "%7s", "-");
    else std::snprintf(ind, sizeof ind, "%7.3f", s.induction);
    std::snprintf(buf, sizeof buf, "%5d %4d %3d %7.3f %s %7.3f %7.3f %7.3f %7.2f  %s\n", s.layer, s.head,
                  m.config.kv_head_of(s.layer, s.head), s.previous_token, ind, s.first_token, s.self, s.entropy_bits,
                  s.mean_distance, head_label(s).c_str());
    io.out << buf;
  }
}

}  // namespace

Action add_heads_command(CLI::App& app, Io& io) {
  auto o = std::make_shared<HeadsOptions>();
  auto* cmd = add_model_command(app, "heads",
      "Score every attention head: previous-token, induction, first-token (sink), self attention, row entropy and "
      "mean distance; with --importance, the loss change when each head is ablated", o->in, kTextOrTokens);
  cmd->add_option("--length", o->length,
                  "without --text/--tokens: length of the random string that is repeated twice (default "
                  "min(40, block_size/2))")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", o->seed, "seed of the random string (default 1)");
  cmd->add_flag("--json", o->json, "print JSON");
  cmd->add_flag("--importance", o->importance,
                "instead: the change in mean next-token loss (nats) over the input when each head alone is ablated, "
                "zero and mean (1 + 2·layers·heads forward passes)");
  cmd->add_flag("--dla", o->dla,
                "instead: direct logit attribution at one position: the logit of the target split into each head's "
                "output, each MLP's, the embeddings' and the biases', through the final norm with its scale frozen");
  cmd->add_flag("--composition", o->composition,
                "instead: Q-, K- and V-composition between every pair of heads in different layers, from the weights "
                "(JSON: q, k, v, each [L][H][L][H])");
  add_target_options(cmd, o->target, "with --dla: ");
  return [o, &io] { run_heads(*o, io); };
}

}  // namespace attnviz
