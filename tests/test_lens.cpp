// The logit lens and direct logit attribution (core/engine/lens.h), and their CLI
// (`lens`, `heads --dla`).
// Tolerances: the lens against plain double-precision loops over the recorded residual
// stream, probabilities within 1e-5 absolute (float products of C ≤ 256 terms); the last
// layer against the trace's own logits within 1e-6 (the same hidden state and product);
// the attribution's parts against the model's logit within 1e-4 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/engine/engine.h"
#include "core/engine/lens.h"
#include "core/error.h"
#include "tests/cli_run.h"
#include "tests/gguf_writer.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

using test::cli;

std::shared_ptr<const Model> small_model(const std::string& arch, int heads, int kv_heads, int vocab = 61) {
  return test::small_model(arch, heads, kv_heads, vocab, 23, "lens");
}

// A llama-shaped model written as GGUF with Q8_0 matrices (rows of 256 values).
std::shared_ptr<const Model> q8_model() {
  ModelConfig c = test::small_config("llama", 2, 256, 4, 2, 320, 16);
  c.n_inner = 512;
  c.head_size = 64;
  const std::string dir = test::temp_dir("lens-q8");
  return load_model(test::write_gguf_model_pair(c, GgmlType::Q8_0, 17, dir, false));
}

std::vector<int> all_positions(const Trace& tr) {
  std::vector<int> p(static_cast<size_t>(tr.T()));
  std::iota(p.begin(), p.end(), 0);
  return p;
}

// Softmax in double of row z (V).
std::vector<double> softmax(const std::vector<double>& z) {
  const double mx = *std::max_element(z.begin(), z.end());
  double s = 0;
  std::vector<double> p(z.size());
  for (size_t v = 0; v < z.size(); ++v) s += p[v] = std::exp(z[v] - mx);
  for (double& v : p) v /= s;
  return p;
}

TEST(LogitLens, LastLayerIsTheModelsOwnPrediction) {
  const auto m = small_model("llama", 4, 2);
  Engine engine(m, make_cpu_backend());
  const Trace& tr = engine.run(test::random_ids(12, 61, 5));
  const int V = m->config.vocab_size;
  const auto cells = logit_lens(*m, tr, m->config.n_layer - 1, all_positions(tr), V);
  for (int i = 0; i < tr.T(); ++i) {
    const float* row = tr.logits_row(i);
    ASSERT_TRUE(row);
    const auto p = softmax(std::vector<double>(row, row + V));
    const LensCell& cell = cells[static_cast<size_t>(i)];
    ASSERT_EQ(static_cast<int>(cell.top_ids.size()), V);
    for (int k = 0; k < V; ++k)
      EXPECT_NEAR(cell.top_probs[static_cast<size_t>(k)], p[static_cast<size_t>(cell.top_ids[static_cast<size_t>(k)])], 1e-6);
    EXPECT_EQ(cell.top_ids[0], static_cast<int>(std::max_element(row, row + V) - row)) << i;
  }
}

// The lens of every layer against loops over the recorded stream: norm, logit_scale,
// unembedding, softmax, in double.
void check_lens_against_loops(const Model& m, const std::vector<int>& ids) {
  Engine engine(std::shared_ptr<const Model>(&m, [](const Model*) {}), make_cpu_backend());
  const Trace& tr = engine.run(ids);
  const ModelConfig& c = m.config;
  const int C = c.n_embd, V = c.vocab_size, K = 5;
  const Mat U = m.weights.unembedding().table_f32();  // (V, C)
  for (int l = 0; l < c.n_layer; ++l) {
    const auto cells = logit_lens(m, tr, l, all_positions(tr), K);
    for (int i = 0; i < tr.T(); ++i) {
      const Tensor& t = l + 1 < c.n_layer ? tr.layers[static_cast<size_t>(l + 1)].resid : tr.final_resid;
      const float* x = t.data.data() + static_cast<size_t>(i) * C;
      double mean = 0, var = 0;
      if (c.arch == Arch::Gpt2)
        for (int e = 0; e < C; ++e) mean += x[e] / C;
      for (int e = 0; e < C; ++e) var += (x[e] - mean) * (x[e] - mean) / C;
      std::vector<double> h(static_cast<size_t>(C));
      for (int e = 0; e < C; ++e)
        h[static_cast<size_t>(e)] = ((x[e] - mean) / std::sqrt(var + c.norm_eps) * m.weights.normf_w[e] +
                                     (m.weights.normf_b.size() ? m.weights.normf_b[e] : 0.0)) *
                                    c.logit_scale;
      std::vector<double> z(static_cast<size_t>(V), 0.0);
      for (int v = 0; v < V; ++v)
        for (int e = 0; e < C; ++e) z[static_cast<size_t>(v)] += h[static_cast<size_t>(e)] * U(v, e);
      const auto p = softmax(z);
      std::vector<int> order(static_cast<size_t>(V));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
      const LensCell& cell = cells[static_cast<size_t>(i)];
      for (int k = 0; k < K; ++k) {
        EXPECT_NEAR(cell.top_probs[static_cast<size_t>(k)], p[static_cast<size_t>(order[static_cast<size_t>(k)])], 1e-5)
            << "layer " << l << " position " << i << " k " << k;
        EXPECT_NEAR(cell.top_probs[static_cast<size_t>(k)], p[static_cast<size_t>(cell.top_ids[static_cast<size_t>(k)])], 1e-5);
      }
      if (i + 1 < tr.T()) {
        const int next = tr.tokens[static_cast<size_t>(i + 1)];
        EXPECT_NEAR(cell.next_prob, p[static_cast<size_t>(next)], 1e-5);
        int rank = 0;
        for (int v = 0; v < V; ++v) rank += z[static_cast<size_t>(v)] > z[static_cast<size_t>(next)];
        EXPECT_NEAR(cell.next_rank, rank, 1) << "layer " << l << " position " << i;  // float ties may swap
      } else {
        EXPECT_EQ(cell.next_rank, -1);
      }
    }
  }
}

TEST(LogitLens, EveryLayerEqualsPlainLoopsOverTheRecordedStream) {
  for (const auto& [arch, kv] : {std::pair<const char*, int>{"llama", 2}, {"gpt2", 4}}) {
    SCOPED_TRACE(arch);
    const auto m = small_model(arch, 4, kv);
    check_lens_against_loops(*m, test::random_ids(10, 61, 7));
  }
}

TEST(LogitLens, BadLayerOrPositionIsAUsageError) {
  const auto m = small_model("llama", 4, 2);
  Engine engine(m, make_cpu_backend());
  const Trace& tr = engine.run(test::random_ids(6, 61, 5));
  try {
    logit_lens(*m, tr, 0, {6}, 3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind, ErrorKind::Usage);
  }
  EXPECT_THROW(logit_lens(*m, tr, 3, {0}, 3), Error);
  EXPECT_THROW(logit_lens(*m, tr, 0, {0}, 0), Error);
}

void expect_sums_to_logit(const Attribution& a) {
  EXPECT_NEAR(a.sum, a.logit, 1e-4 * std::max(std::abs(a.logit), 1e-2)) << "logit " << a.logit << " sum " << a.sum;
}

void check_dla_sums(const Model& m, const std::vector<int>& ids) {
  Engine engine(std::shared_ptr<const Model>(&m, [](const Model*) {}), make_cpu_backend());
  const Trace& tr = engine.run(ids);
  const ModelConfig& c = m.config;
  for (int i : {0, tr.T() / 2, tr.T() - 1}) {
    const int pred = predicted_token(m, tr, i);
    const Attribution a = direct_logit_attribution(m, tr, i, {pred});
    ASSERT_EQ(a.heads.size(), static_cast<size_t>(c.n_layer));
    ASSERT_EQ(a.heads[0].size(), static_cast<size_t>(c.n_head));
    ASSERT_EQ(a.mlp.size(), static_cast<size_t>(c.n_layer));
    EXPECT_GT(a.norm_scale, 0);
    expect_sums_to_logit(a);
    const Attribution d = direct_logit_attribution(m, tr, i, {pred, (pred + 1) % c.vocab_size});
    expect_sums_to_logit(d);
    // Every head counts: none is silently 0.
    for (const auto& layer : a.heads)
      for (double v : layer) EXPECT_NE(v, 0.0);
  }
}

TEST(LogitAttribution, PartsSumToTheLogitLlamaGqa) {
  const auto m = small_model("llama", 4, 2);
  check_dla_sums(*m, test::random_ids(11, 61, 9));
}

TEST(LogitAttribution, PartsSumToTheLogitGpt2LayerNormAndBiases) {
  const auto m = small_model("gpt2", 4, 4);
  ASSERT_TRUE(m->weights.normf_b.size());
  check_dla_sums(*m, test::random_ids(11, 61, 9));
}

TEST(LogitAttribution, PartsSumToTheLogitGgufQ8) {
  const auto m = q8_model();
  ASSERT_TRUE(m->weights.layers[0].wo.is_stored());
  check_dla_sums(*m, test::random_ids(9, 320, 4));
}

// A head zeroed in the run: its share is 0, the parts still sum to the (changed) logit,
// and the sum differs from the clean run's by more than rounding.
TEST(LogitAttribution, ZeroingAHeadChangesTheSum) {
  const auto m = small_model("llama", 4, 2);
  const auto ids = test::random_ids(11, 61, 9);
  Engine engine(m, make_cpu_backend());
  const Trace& clean_tr = engine.run(ids);
  const int pos = clean_tr.T() - 1, target = predicted_token(*m, clean_tr, pos);
  const Attribution clean = direct_logit_attribution(*m, clean_tr, pos, {target});
  engine.set_ablation(Ablation{AblationMode::Zero, {{2, 1}}});
  const Trace& ablated_tr = engine.run(ids);
  const Attribution ablated = direct_logit_attribution(*m, ablated_tr, pos, {target});
  EXPECT_EQ(ablated.heads[2][1], 0.0);
  expect_sums_to_logit(ablated);
  EXPECT_GT(std::abs(ablated.sum - clean.sum), 1e-3 * std::abs(clean.heads[2][1]));
}

TEST(LogitAttribution, BadTargetsAndPositionsAreUsageErrors) {
  const auto m = small_model("llama", 4, 2);
  Engine engine(m, make_cpu_backend());
  const Trace& tr = engine.run(test::random_ids(6, 61, 5));
  for (const auto& [pos, ids] : {std::pair<int, std::vector<int>>{6, {1}}, {-1, {1}}, {0, {61}}, {0, {}}, {0, {1, 2, 3}}}) {
    try {
      direct_logit_attribution(*m, tr, pos, ids);
      ADD_FAILURE() << pos;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind, ErrorKind::Usage) << e.what();
    }
  }
}

// ---- Key attribution ----

// Each head's key shares summed over the keys against the head's share as
// direct_logit_attribution computes it (its recorded output through wo: another product),
// within 1e-4 of the largest head share; keys after the position hold 0.
void check_key_shares(const Model& m, const Trace& tr) {
  const ModelConfig& c = m.config;
  for (int i : {0, tr.T() / 2, tr.T() - 1}) {
    const int pred = predicted_token(m, tr, i);
    for (const std::vector<int>& ids : {std::vector<int>{pred}, std::vector<int>{pred, (pred + 1) % c.vocab_size}}) {
      const Attribution a = direct_logit_attribution(m, tr, i, ids);
      const KeyAttribution k = key_attribution(m, tr, i, ids);
      ASSERT_EQ(k.shares.size(), static_cast<size_t>(c.n_layer) * c.n_head * tr.T());
      EXPECT_EQ(k.logit, a.logit);
      double largest = 1e-3;
      for (const auto& layer : a.heads)
        for (double v : layer) largest = std::max(largest, std::abs(v));
      for (int l = 0; l < c.n_layer; ++l)
        for (int h = 0; h < c.n_head; ++h) {
          const float* s = k.head(l, h);
          double sum = 0;
          for (int j = 0; j < tr.T(); ++j) {
            sum += s[j];
            if (j > i) { EXPECT_EQ(s[j], 0.f) << "future key " << j << " of query " << i; }
          }
          EXPECT_NEAR(sum, a.heads[static_cast<size_t>(l)][static_cast<size_t>(h)], 1e-4 * largest)
              << "layer " << l << " head " << h << " position " << i;
          EXPECT_EQ(k.replaced[static_cast<size_t>(l) * c.n_head + h], 0);
        }
    }
  }
}

TEST(KeyAttribution, SharesSumToEachHeadsShareLlamaGqa) {
  const auto m = small_model("llama", 4, 2);
  Engine engine(m, make_cpu_backend());
  check_key_shares(*m, engine.run(test::random_ids(11, 61, 9)));
}

TEST(KeyAttribution, SharesSumToEachHeadsShareGpt2) {
  const auto m = small_model("gpt2", 4, 4);
  Engine engine(m, make_cpu_backend());
  check_key_shares(*m, engine.run(test::random_ids(11, 61, 9)));
}

// Stored Q8_0 wo (read row by row), and a compact trace (attention rows recomputed).
TEST(KeyAttribution, SharesSumToEachHeadsShareGgufQ8Compact) {
  const auto m = q8_model();
  ASSERT_TRUE(m->weights.layers[0].wo.is_stored());
  Engine engine(m, make_cpu_backend());
  engine.set_matrices(Engine::Matrices::kRecompute);
  const Trace& tr = engine.run(test::random_ids(9, 320, 4));
  ASSERT_TRUE(tr.layers[0].compact);
  check_key_shares(*m, tr);
}

// One key's share written out: a_ij times v_j through head h's rows of wo (float32 here)
// and g, in double, within 1e-5 relative.
TEST(KeyAttribution, OneKeyMatchesPlainLoops) {
  const auto m = small_model("llama", 4, 2);
  const ModelConfig& c = m->config;
  Engine engine(m, make_cpu_backend());
  const Trace& tr = engine.run(test::random_ids(11, 61, 9));
  const int i = tr.T() - 1, l = 1, h = 3, j = 4, d = c.head_size, C = c.n_embd;
  const int target = predicted_token(*m, tr, i);
  const KeyAttribution k = key_attribution(*m, tr, i, {target});
  // g = s · w_f ⊙ u_target (RMSNorm), s from the final stream.
  const Tensor& xf = tr.final_resid;
  double ms = 0;
  for (int e = 0; e < C; ++e) ms += static_cast<double>(xf.data[static_cast<size_t>(i) * C + e]) * xf.data[static_cast<size_t>(i) * C + e];
  const double s = 1.0 / std::sqrt(ms / C + c.norm_eps);
  const Mat U = m->weights.unembedding().table_f32();
  const Mat Wo = m->weights.layers[l].wo.linear_f32();  // (H·d, C)
  const LayerTrace& lt = tr.layers[l];
  double share = 0;
  for (int e = 0; e < d; ++e) {
    double r = 0;
    for (int cc = 0; cc < C; ++cc)
      r += static_cast<double>(Wo(h * d + e, cc)) * c.logit_scale * s * m->weights.normf_w[cc] * U(target, cc);
    share += static_cast<double>(lt.v.at(c.kv_head_of(h), j, e)) * r;
  }
  share *= static_cast<double>(lt.probs.at(h, i, j)) * c.residual_scale;
  EXPECT_NEAR(k.head(l, h)[j], share, 1e-5 * std::max(std::abs(share), 1e-3));
  EXPECT_NE(share, 0.0);
}

// Keys outside a local layer's window get no share; an ablated head is marked and carries
// nothing; a cancelled computation throws Cancelled.
TEST(KeyAttribution, WindowsAblationAndCancel) {
  nlohmann::json j = {{"model_type", "mistral"},  {"vocab_size", 61},        {"hidden_size", 32},
                      {"intermediate_size", 48},  {"num_hidden_layers", 2},  {"num_attention_heads", 4},
                      {"num_key_value_heads", 2}, {"max_position_embeddings", 64}, {"rms_norm_eps", 1e-5},
                      {"rope_theta", 10000.0},    {"tie_word_embeddings", false}, {"sliding_window", 3}};
  const auto m = load_model(test::make_model_dir(parse_config(j, "key attribution window"), 5, "key-attr-window"));
  Engine engine(m, make_cpu_backend());
  engine.set_ablation(Ablation{AblationMode::Zero, {{1, 2}}});
  const Trace& tr = engine.run(test::random_ids(10, 61, 3));
  const int i = tr.T() - 1;
  const KeyAttribution k = key_attribution(*m, tr, i, {predicted_token(*m, tr, i)});
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 4; ++h) {
      const bool ablated = l == 1 && h == 2;
      EXPECT_EQ(k.replaced[static_cast<size_t>(l) * 4 + h], ablated ? 1 : 0);
      int nonzero = 0;
      for (int jj = 0; jj < tr.T(); ++jj) {
        const bool seen = jj <= i && jj > i - 3;
        if (!seen || ablated) { EXPECT_EQ(k.head(l, h)[jj], 0.f) << l << " " << h << " key " << jj; }
        else { nonzero += k.head(l, h)[jj] != 0.f; }
      }
      EXPECT_EQ(nonzero, ablated ? 0 : 3) << l << " " << h;
    }
  std::atomic<bool> cancel{true};
  EXPECT_THROW(key_attribution(*m, tr, i, {1}, &cancel), Cancelled);
  EXPECT_THROW(key_attribution(*m, tr, tr.T(), {1}), Error);
}

// ---- CLI ----

// The CLI tests' model directory, made by the first test that asks for it.
const std::string& dir() {
  static const std::string d = test::make_model_dir(test::small_config("llama", 2, 32, 4, 2, 128, 32), 3, "lens-cli");
  return d;
}

TEST(LensCli, LensJsonHasThePinnedFieldsAndShapes) {
  const auto r = cli({"lens", "--model", dir(), "--tokens", "5,9,33,40,41,7", "--top", "3", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layers"], 2);
  EXPECT_EQ(j["positions"], 6);
  for (const char* f : {"top_ids", "top_probs"}) {
    ASSERT_EQ(j[f].size(), 2u) << f;
    ASSERT_EQ(j[f][0].size(), 6u) << f;
    EXPECT_EQ(j[f][1][5].size(), 3u) << f;
  }
  for (const char* f : {"next_prob", "next_rank"}) {
    ASSERT_EQ(j[f].size(), 2u) << f;
    EXPECT_EQ(j[f][0].size(), 5u) << f;
  }
  EXPECT_GE(j["top_probs"][0][0][0].get<double>(), j["top_probs"][0][0][1].get<double>());
  EXPECT_GE(j["next_rank"][1][4].get<int>(), 0);
  const auto text = cli({"lens", "--model", dir(), "--text", "hello"});
  EXPECT_EQ(text.code, 0) << text.err;
}

TEST(LensCli, HeadsDlaJsonHasThePinnedFields) {
  const auto r = cli({"heads", "--model", dir(), "--tokens", "5,9,33,40,41,7", "--dla", "--position", "3",
                      "--target-ids", "10,11", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["position"], 3);
  EXPECT_EQ(j["target_ids"], nlohmann::json::array({10, 11}));
  ASSERT_EQ(j["heads"].size(), 2u);
  EXPECT_EQ(j["heads"][0].size(), 4u);
  EXPECT_EQ(j["mlp"].size(), 2u);
  for (const char* f : {"logit", "embed", "rest", "sum", "norm_scale"}) EXPECT_TRUE(j[f].is_number()) << f;
  EXPECT_NEAR(j["sum"].get<double>(), j["logit"].get<double>(), 1e-4 * std::max(std::abs(j["logit"].get<double>()), 1e-2));
  // Defaults: the last position, the predicted token; --target as text.
  const auto d = cli({"heads", "--model", dir(), "--text", "abcab", "--dla", "--json"});
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_EQ(nlohmann::json::parse(d.out)["position"], 4);
  const auto t = cli({"heads", "--model", dir(), "--text", "abcab", "--dla", "--target", "c"});
  EXPECT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("sum"), std::string::npos);
}

TEST(LensCli, BadPositionTargetOrTopIsExit2) {
  const std::vector<std::string> base = {"heads", "--model", dir(), "--tokens", "5,9,33", "--dla"};
  const std::vector<std::vector<std::string>> bad = {{"--position", "3"}, {"--position", "-5"},
                                                     {"--target-ids", "128"}, {"--target-ids", "1,2,3"},
                                                     {"--target", "ab"}};
  for (const auto& extra : bad) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = cli(args);
    EXPECT_EQ(r.code, 2) << extra[0] << " " << extra[1] << ": " << r.err;
    EXPECT_FALSE(r.err.empty());
  }
  EXPECT_EQ(cli({"lens", "--model", dir(), "--tokens", "5,9", "--top", "0"}).code, 2);
  EXPECT_EQ(cli({"lens", "--model", dir(), "--tokens", "5,900"}).code != 0, true);
}

}  // namespace
}  // namespace attnviz
