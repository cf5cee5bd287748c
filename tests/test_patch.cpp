// Activation patching (core/engine/patch.h), its CLI (`patch`), and `dump --stages resid`.
// Tolerances: patched metrics against the literal double-precision reference within 1e-4
// relative to max(|metric|, 1) (float passes of C ≤ 32 wide products against double
// loops); a residual-stream patch that makes A's run B's against B's metric within 1e-5
// of the same scale (the same float pass, rows computed in another grouping). An unchanged
// patch (B = A) must give A's metric bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/engine/engine.h"
#include "core/engine/lens.h"
#include "core/engine/patch.h"
#include "core/engine/reference.h"
#include "core/error.h"
#include "core/model/safetensors.h"
#include "tests/cli_run.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

using test::cli;

std::shared_ptr<const Model> small_model(const std::string& arch, int heads, int kv_heads, int vocab = 53) {
  return test::small_model(arch, heads, kv_heads, vocab, 29, "patch");
}

double scale(double v) { return std::max(std::abs(v), 1.0); }

// The metric from a reference trace's logits: the logit of ids[0] (minus that of ids[1]).
double reference_metric(const Trace& ref, int pos, const std::vector<int>& ids) {
  const auto logit = [&](int id) {  // logits (T, V)
    return static_cast<double>(ref.logits.data[static_cast<size_t>(pos * ref.logits.dim(1) + id)]);
  };
  return logit(ids[0]) - (ids.size() > 1 ? logit(ids[1]) : 0.0);
}

// B's head outputs, as a HeadOutputs source, from a trace.
std::shared_ptr<HeadOutputs> outputs_of(const Trace& tr, int d) {
  auto s = std::make_shared<HeadOutputs>();
  s->T = tr.T(), s->d = d;
  for (const LayerTrace& lt : tr.layers) {
    const Tensor out = lt.out.dense_copy();  // (H, T, d)
    s->out.emplace_back(out.data.begin(), out.data.end());
  }
  return s;
}

struct Arch {
  const char* name;
  int heads, kv_heads;
};
class PatchArch : public ::testing::TestWithParam<Arch> {};

TEST_P(PatchArch, UnchangedPatchChangesNothingBitForBit) {
  const auto m = small_model(GetParam().name, GetParam().heads, GetParam().kv_heads);
  const auto a = test::random_ids(10, 53, 3);
  for (const PatchKind kind : {PatchKind::Heads, PatchKind::Resid})
    for (const bool incremental : {true, false}) {
      PatchRequest req;
      req.kind = kind;
      req.incremental = incremental;
      req.position = 7;
      const PatchResult r = activation_patching(*m, a, a, req);
      EXPECT_EQ(r.clean, r.other);
      const size_t cols = kind == PatchKind::Heads ? static_cast<size_t>(m->config.n_head) : a.size();
      ASSERT_EQ(r.grid.size(), static_cast<size_t>(m->config.n_layer));
      for (size_t l = 0; l < r.grid.size(); ++l) {
        ASSERT_EQ(r.grid[l].size(), cols);
        for (size_t c = 0; c < cols; ++c)
          EXPECT_EQ(r.grid[l][c], r.clean) << (kind == PatchKind::Heads ? "head " : "resid ") << l << "," << c
                                           << (incremental ? "" : " (every cell run)");
      }
      // Incremental: no pass at all. Otherwise every cell: one per head, or per layer and position ≤ 7.
      EXPECT_EQ(r.passes, incremental ? 0 : m->config.n_layer * (kind == PatchKind::Heads ? m->config.n_head : 8));
    }
}

// Head patches against the literal reference (double loops) with B's outputs put in.
TEST_P(PatchArch, HeadPatchMatchesTheReference) {
  const auto m = small_model(GetParam().name, GetParam().heads, GetParam().kv_heads);
  const auto a = test::random_ids(9, 53, 11), b = test::random_ids(9, 53, 12);
  PatchRequest req;
  req.kind = PatchKind::Heads;
  req.target_ids = {4, 9};
  const PatchResult r = activation_patching(*m, a, b, req);
  EXPECT_EQ(r.metric, "logit_diff");
  EXPECT_EQ(r.position, 8);
  const Trace ref_a = reference_forward(*m, a), ref_b = reference_forward(*m, b);
  EXPECT_NEAR(r.clean, reference_metric(ref_a, 8, {4, 9}), 1e-4 * scale(r.clean));
  EXPECT_NEAR(r.other, reference_metric(ref_b, 8, {4, 9}), 1e-4 * scale(r.other));
  const auto source = outputs_of(ref_b, m->config.head_size);
  double moved = 0;
  for (int l = 0; l < m->config.n_layer; ++l)
    for (int h = 0; h < m->config.n_head; ++h) {
      const Trace ref = reference_forward(*m, a, Ablation{AblationMode::Zero, {{l, h}}, source});
      const double want = reference_metric(ref, 8, {4, 9});
      EXPECT_NEAR(r.grid[static_cast<size_t>(l)][static_cast<size_t>(h)], want, 1e-4 * scale(want)) << l << ":" << h;
      moved = std::max(moved, std::abs(want - r.clean));
    }
  EXPECT_GT(moved, 1e-3) << "the prompts must differ enough for the check to mean something";
}

// B = A but for the token at k: the stream entering layer 0 at k is the only difference,
// so patching it makes A's run B's (the metric becomes B's); at every other position of
// layer 0 B's stream is A's, bit for bit, so those cells stay clean. The default target is
// A's prediction; the position a middle one, so later cells stay clean too.
TEST_P(PatchArch, ResidPatchOfTheOnlyDifferingTokenGivesB) {
  const auto m = small_model(GetParam().name, GetParam().heads, GetParam().kv_heads);
  const auto a = test::random_ids(12, 53, 21);
  for (const int k : {4, 9}) {
    auto b = a;
    b[static_cast<size_t>(k)] = (a[static_cast<size_t>(k)] + 7) % 53;
    for (const bool incremental : {true, false}) {
      PatchRequest req;
      req.kind = PatchKind::Resid;
      req.position = 9;
      req.incremental = incremental;
      const PatchResult r = activation_patching(*m, a, b, req);
      Engine engine(m, make_cpu_backend());
      EXPECT_EQ(r.target_ids, std::vector<int>{predicted_token(*m, engine.run(a), 9)});
      EXPECT_GT(std::abs(r.other - r.clean), 1e-3);
      EXPECT_NEAR(r.grid[0][static_cast<size_t>(k)], r.other, 1e-5 * scale(r.other)) << "k " << k;
      // Positions before k see nothing of B at any layer, nor does layer 0 after k; after the
      // metric's position nothing counts. Those cells are A's run: skipped, or a pass over
      // every row that must reproduce it bit for bit.
      for (size_t l = 0; l < r.grid.size(); ++l)
        for (int t = 0; t < 12; ++t)
          if (t < k || t > 9 || (l == 0 && t != k)) {
            EXPECT_EQ(r.grid[l][static_cast<size_t>(t)], r.clean) << l << "," << t << (incremental ? "" : " (every cell run)");
          }
      // A patch at the metric's own position in the last layer: only that row's last layer is B's.
      if (k == 9) {
        EXPECT_NE(r.grid.back()[9], r.clean);
      }
    }
  }
}

// Head passes that start at the first row where B's output differs (the rows before kept)
// against passes over every row.
TEST_P(PatchArch, HeadPassesFromTheFirstDifferingRowMatchFullPasses) {
  const auto m = small_model(GetParam().name, GetParam().heads, GetParam().kv_heads);
  const auto a = test::random_ids(12, 53, 41);
  auto b = a;
  b[6] = (a[6] + 5) % 53;
  PatchRequest req;
  req.kind = PatchKind::Heads;
  req.target_ids = {2, 7};
  const PatchResult fast = activation_patching(*m, a, b, req);
  req.incremental = false;
  const PatchResult full = activation_patching(*m, a, b, req);
  EXPECT_EQ(fast.clean, full.clean);
  for (size_t l = 0; l < full.grid.size(); ++l)
    for (size_t h = 0; h < full.grid[l].size(); ++h)
      EXPECT_NEAR(fast.grid[l][h], full.grid[l][h], 1e-5 * scale(full.grid[l][h])) << l << ":" << h;
  EXPECT_GT(std::abs(full.grid[0][0] - full.clean) + std::abs(full.grid[1][1] - full.clean), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Families, PatchArch,
                         ::testing::Values(Arch{"gpt2", 4, 4}, Arch{"llama", 4, 2}),
                         [](const auto& info) { return std::string(info.param.name); });

// A residual-stream patch at (l, t) against an independent way to get the same run: the
// stream entering layer l at t replaced, then every later row and layer recomputed from
// there by a full forward_from_layer pass (all rows), not the KV-cached one.
TEST(Patch, ResidPatchMatchesAFullPassFromTheLayer) {
  const auto m = small_model("llama", 4, 2);
  const auto a = test::random_ids(10, 53, 31), b = test::random_ids(10, 53, 32);
  PatchRequest req;
  req.kind = PatchKind::Resid;
  req.target_ids = {3};
  const PatchResult r = activation_patching(*m, a, b, req);
  const auto backend = make_cpu_backend();
  Engine eb(m, make_cpu_backend());
  const Trace tb = eb.run(b);
  const int C = m->config.n_embd;
  for (const auto& [l, t] : {std::pair{0, 2}, {1, 5}, {2, 9}, {1, 0}}) {
    Engine ea(m, make_cpu_backend());
    Trace tr = ea.run(a);
    std::copy_n(tb.layers[static_cast<size_t>(l)].resid.data.data() + static_cast<size_t>(t) * C, C,
                tr.layers[static_cast<size_t>(l)].resid.data.data() + static_cast<size_t>(t) * C);
    ASSERT_TRUE(backend->forward_from_layer(*m, a, l, tr));
    const double want = tr.logits_row(9)[3];
    EXPECT_NEAR(r.grid[static_cast<size_t>(l)][static_cast<size_t>(t)], want, 1e-5 * scale(want)) << l << "," << t;
  }
}

TEST(Patch, BadInputIsAClearError) {
  const auto m = small_model("llama", 4, 2);
  const auto a = test::random_ids(6, 53, 1);
  const auto expect_error = [&](const std::vector<int>& b, PatchRequest req, ErrorKind kind, const std::string& says) {
    try {
      activation_patching(*m, a, b, req);
      ADD_FAILURE() << says;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind, kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  expect_error(test::random_ids(7, 53, 2), {}, ErrorKind::Data, "(A: 6, B: 7)");
  PatchRequest far;
  far.position = 6;
  expect_error(a, far, ErrorKind::Usage, "outside the text");
  PatchRequest bad_target;
  bad_target.target_ids = {53};
  expect_error(a, bad_target, ErrorKind::Usage, "outside the vocabulary");
  bad_target.target_ids = {1, 2, 3};
  expect_error(a, bad_target, ErrorKind::Usage, "one target id or two");
  expect_error({1, 2, 3, 4, 5, 99}, {}, ErrorKind::Data, "outside the vocabulary");
}

TEST(Patch, ProgressCanStopTheGrid) {
  const auto m = small_model("llama", 4, 2);
  const auto a = test::random_ids(6, 53, 1), b = test::random_ids(6, 53, 2);
  int calls = 0;
  EXPECT_THROW(activation_patching(*m, a, b, {}, [&](int done, int total) {
                 EXPECT_EQ(total, 3 * 4);
                 return ++calls == done && done < 5;
               }),
               Cancelled);
  EXPECT_EQ(calls, 5);
}

// ---- CLI ----

// The CLI tests' model directory, made by the first test that asks for it.
const std::string& dir() {
  static const std::string d = test::make_model_dir(test::small_config("llama", 2, 32, 4, 2, 128, 32), 5, "patch-cli");
  return d;
}

TEST(PatchCli, JsonHasThePinnedFieldsAndShapes) {
  const auto h = cli({"patch", "--model", dir(), "--tokens", "5,9,33,40,41,7", "--other-tokens", "5,9,34,40,41,7",
                      "--heads", "--json"});
  ASSERT_EQ(h.code, 0) << h.err;
  const auto j = nlohmann::json::parse(h.out);
  EXPECT_EQ(j["metric"], "logit");
  EXPECT_EQ(j["position"], 5);
  EXPECT_EQ(j["target_ids"].size(), 1u);
  for (const char* f : {"clean", "other"}) EXPECT_TRUE(j[f].is_number()) << f;
  ASSERT_EQ(j["heads"].size(), 2u);
  EXPECT_EQ(j["heads"][1].size(), 4u);
  EXPECT_FALSE(j.contains("resid"));
  const auto r = cli({"patch", "--model", dir(), "--tokens", "5,9,33,40,41,7", "--other-tokens", "5,9,34,40,41,7",
                      "--resid", "--position", "4", "--target-ids", "10,11", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto k = nlohmann::json::parse(r.out);
  EXPECT_EQ(k["metric"], "logit_diff");
  EXPECT_EQ(k["target_ids"], nlohmann::json::array({10, 11}));
  ASSERT_EQ(k["resid"].size(), 2u);
  EXPECT_EQ(k["resid"][0].size(), 6u);
  EXPECT_EQ(k["resid"][1][0], k["clean"]);  // before the differing token
  EXPECT_EQ(k["resid"][0][5], k["clean"]);  // after the position
  EXPECT_NEAR(k["resid"][0][2].get<double>(), k["other"].get<double>(), 1e-4);
  const auto text = cli({"patch", "--model", dir(), "--text", "abcab", "--other", "abdab", "--resid", "--target", "c"});
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("clean (A)"), std::string::npos) << text.out;
}

TEST(PatchCli, BadInputExitCodes) {
  const std::vector<std::string> base = {"patch", "--model", dir(), "--tokens", "5,9,33", "--other-tokens", "5,9,34"};
  const std::vector<std::pair<std::vector<std::string>, int>> cases = {
      {{"--heads", "--position", "3"}, 2},     {{"--heads", "--position", "-4"}, 2},
      {{"--resid", "--target-ids", "128"}, 2}, {{"--resid", "--target-ids", "1,2,3"}, 2},
      {{"--heads", "--target", "ab"}, 2},      {{}, 2},
      {{"--heads", "--resid"}, 2},             {{"--heads", "--backend", "gpu"}, 1}};
  for (const auto& [extra, code] : cases) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = cli(args);
    EXPECT_EQ(r.code, code) << ::testing::PrintToString(extra) << ": " << r.err;
    EXPECT_FALSE(r.err.empty());
  }
  const auto lengths = cli({"patch", "--model", dir(), "--tokens", "5,9,33", "--other-tokens", "5,9", "--heads"});
  EXPECT_EQ(lengths.code, 1);
  EXPECT_NE(lengths.err.find("A: 3, B: 2"), std::string::npos) << lengths.err;
  EXPECT_EQ(cli({"patch", "--model", dir(), "--text", "abc", "--other-tokens", "5,9,34", "--heads"}).code, 2);
  EXPECT_EQ(cli({"patch", "--model", dir(), "--tokens", "5,9,33", "--other-tokens", "5,9,999", "--heads"}).code, 1);
  // A model without a tokenizer: --text is an error saying so, exit 1.
  const std::string bare = test::temp_dir("patch-bare");
  for (const auto& e : std::filesystem::directory_iterator(dir()))
    if (e.path().filename().string().rfind("tokenizer", 0) != 0)
      std::filesystem::copy(e.path(), bare + "/" + e.path().filename().string());
  const auto no_tok = cli({"patch", "--model", bare, "--text", "abc", "--other", "abd", "--heads"});
  EXPECT_EQ(no_tok.code, 1) << no_tok.err;
  EXPECT_NE(no_tok.err.find("tokenizer"), std::string::npos) << no_tok.err;
  const auto help = cli({"--help"});
  EXPECT_NE(help.out.find("patch"), std::string::npos);
  EXPECT_EQ(cli({"patch", "--help"}).code, 0);
}

// `dump --stages resid`: the stream entering each layer and after the last, as the trace
// holds it; not in a default dump.
TEST(PatchCli, DumpStagesResid) {
  const std::string out = test::temp_dir("patch-dump") + "/d.safetensors";
  const auto r = cli({"dump", "--model", dir(), "--tokens", "5,9,33,40", "--stages", "probs,resid", "--layers", "1",
                      "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  Engine engine(load_model(dir()), make_cpu_backend());
  const Trace& tr = engine.run({5, 9, 33, 40});
  const auto f = SafetensorsFile::open(out);
  ASSERT_TRUE(f.find("layers.1.resid"));
  EXPECT_FALSE(f.find("layers.0.resid"));
  EXPECT_TRUE(f.find("layers.1.probs"));
  EXPECT_FALSE(f.find("logits"));
  EXPECT_EQ(f.find("layers.1.resid")->shape, (std::vector<int64_t>{4, 32}));
  EXPECT_EQ(f.read_f32(*f.find("layers.1.resid")), std::vector<float>(tr.layers[1].resid.data.begin(),
                                                                       tr.layers[1].resid.data.begin() + 4 * 32));
  ASSERT_TRUE(f.find("resid_final"));
  EXPECT_EQ(f.read_f32(*f.find("resid_final")),
            std::vector<float>(tr.final_resid.data.begin(), tr.final_resid.data.begin() + 4 * 32));
  ASSERT_EQ(cli({"dump", "--model", dir(), "--tokens", "5,9,33,40", "--out", out}).code, 0);
  const auto g = SafetensorsFile::open(out);
  EXPECT_FALSE(g.find("layers.0.resid"));
  EXPECT_FALSE(g.find("resid_final"));
  EXPECT_EQ(cli({"dump", "--model", dir(), "--tokens", "5", "--stages", "residual", "--out", out}).code, 2);
}

}  // namespace
}  // namespace attnviz
