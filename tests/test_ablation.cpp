// Head ablation: the fast CPU path against the literal reference with the head's output
// replaced (zero and mean), incremental typing against a full recompute with heads
// ablated, and the --ablate list parser.
// Tolerance: as the forward's parity test, relative error ≤ 1e-4 per tensor against the
// double-precision reference; incremental vs full ≤ 1e-5 (the same float operations).
#include <gtest/gtest.h>

#include <cmath>

#include "core/engine/ablation.h"
#include "core/engine/engine.h"
#include "core/engine/reference.h"
#include "core/error.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

struct AblationCase {
  const char* name;
  const char* arch;
  int heads, kv_heads;
  AblationMode mode;
  std::vector<std::pair<int, int>> ablated;
};

void PrintTo(const AblationCase& c, std::ostream* os) { *os << c.name; }

class AblatedForward : public ::testing::TestWithParam<AblationCase> {
 protected:
  std::shared_ptr<const Model> model(const AblationCase& k) {
    const auto c = test::small_config(k.arch, 3, 8 * k.heads, k.heads, k.kv_heads, 31, 32);
    return load_model(test::make_model_dir(c, 17, k.name));
  }
  static Ablation ablation(const AblationCase& k) { return Ablation{k.mode, k.ablated}; }
  // A CPU engine with the case's heads ablated.
  static Engine ablated_engine(const AblationCase& k, std::shared_ptr<const Model> m) {
    Engine e(std::move(m), make_cpu_backend());
    e.set_ablation(ablation(k));
    return e;
  }
};

TEST_P(AblatedForward, EqualsTheReferenceWithTheHeadOutputReplaced) {
  const AblationCase k = GetParam();
  const auto m = model(k);
  const auto ids = test::random_ids(14, 31, 3);
  Engine engine = ablated_engine(k, m);
  const Trace& fast = engine.run(ids);
  const Trace ref = reference_forward(*m, ids, ablation(k));
  EXPECT_EQ(test::compare_traces(fast, ref, 1e-4), "");
  EXPECT_EQ(fast.ablation, ablation(k));

  // The replaced outputs are what the trace records: zeros, or every row equal to the mean
  // of the unablated rows (the clean run's, as the layer's input is not yet affected).
  const Trace clean = reference_forward(*m, ids);
  const auto [l0, h0] = k.ablated.front();
  const Tensor& out = fast.layers[l0].out;  // (H, T, d)
  for (int e = 0; e < out.dim(2); ++e) {
    double mean = 0;
    for (int t = 0; t < 14; ++t) mean += clean.layers[l0].out.at(h0, t, e) / 14.0;
    for (int t = 0; t < 14; ++t)
      EXPECT_NEAR(out.at(h0, t, e), k.mode == AblationMode::Zero ? 0.0 : mean, 1e-5) << "row " << t << " col " << e;
  }
  // The ablation changes the logits (so the comparison above could fail).
  EXPECT_GT(test::rel_error(fast.logits, clean.logits), 1e-4);
}

TEST_P(AblatedForward, IncrementalTypingEqualsAFullRecompute) {
  const AblationCase k = GetParam();
  const auto m = model(k);
  const auto ids = test::random_ids(16, 31, 9);
  Engine e = ablated_engine(k, m);
  std::vector<int> typed;
  for (int t : ids) {
    typed.push_back(t);
    const Trace& inc = e.run(typed);
    const int expected_from = k.mode == AblationMode::Mean ? 0 : static_cast<int>(typed.size()) - 1;
    EXPECT_EQ(e.last_recomputed_from(), expected_from);
    ASSERT_EQ(test::compare_traces(inc, ablated_engine(k, m).run(typed), 1e-5), "") << "after " << typed.size() << " tokens";
  }
  // An edit in the middle, then switching the ablation off and on again.
  auto edited = typed;
  edited[7] = (edited[7] + 1) % 31;
  Engine fresh = ablated_engine(k, m);
  EXPECT_EQ(test::compare_traces(e.run(edited), fresh.run(edited), 1e-5), "");
  e.set_ablation({});
  Engine plain(m, make_cpu_backend());
  EXPECT_EQ(test::compare_traces(e.run(edited), plain.run(edited), 1e-5), "") << "ablation switched off";
  EXPECT_EQ(e.last_recomputed_from(), 0);
  e.set_ablation(ablation(k));
  EXPECT_EQ(test::compare_traces(e.run(edited), fresh.trace(), 1e-5), "") << "switched on again";
}

TEST_P(AblatedForward, ChangingTheAblationRecomputesFromItsFirstLayer) {
  const AblationCase k = GetParam();
  const auto m = model(k);
  const auto ids = test::random_ids(12, 31, 5);
  Engine e(m, make_cpu_backend());
  const Trace clean = e.run(ids);
  const int first = k.ablated.front().first;
  e.set_ablation(ablation(k));
  const Trace& on = e.run(ids);
  EXPECT_EQ(e.last_recomputed_from_layer(), first);
  EXPECT_EQ(test::compare_traces(on, ablated_engine(k, m).run(ids), 1e-5), "");
  for (int l = 0; l < first; ++l)  // the layers before it are the clean ones, untouched
    EXPECT_EQ(on.layers[l].out.data, clean.layers[l].out.data) << "layer " << l;
  e.set_ablation({});
  EXPECT_EQ(test::compare_traces(e.run(ids), clean, 1e-5), "") << "switched off";
  EXPECT_EQ(e.last_recomputed_from_layer(), first);
  // An ablation change together with new tokens recomputes everything.
  e.set_ablation(ablation(k));
  auto more = ids;
  more.push_back(3);
  EXPECT_EQ(test::compare_traces(e.run(more), ablated_engine(k, m).run(more), 1e-5), "");
  EXPECT_EQ(e.last_recomputed_from_layer(), 0);
  EXPECT_EQ(e.last_recomputed_from(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    RandomModels, AblatedForward,
    ::testing::Values(AblationCase{"gpt2_zero", "gpt2", 4, 4, AblationMode::Zero, {{0, 1}, {2, 3}}},
                      AblationCase{"gpt2_mean", "gpt2", 4, 4, AblationMode::Mean, {{1, 2}}},
                      AblationCase{"llama_gqa_zero", "llama", 6, 2, AblationMode::Zero, {{1, 0}, {1, 5}}},
                      AblationCase{"llama_gqa_mean", "llama", 6, 2, AblationMode::Mean, {{0, 4}, {2, 1}}},
                      AblationCase{"gpt2_whole_layer_mean", "gpt2", 3, 3, AblationMode::Mean, {{1, 0}, {1, 1}, {1, 2}}},
                      AblationCase{"llama_whole_layer_zero", "llama", 4, 2, AblationMode::Zero, {{0, 0}, {0, 1}, {0, 2}, {0, 3}}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(AblationList, ParsesSortsAndKeepsTheMode) {
  ModelConfig c;
  c.n_layer = 2, c.n_head = 8;
  const Ablation a = parse_ablation("1:7,0:3", "mean", c);
  EXPECT_EQ(a.mode, AblationMode::Mean);
  EXPECT_EQ(a.heads, (std::vector<std::pair<int, int>>{{0, 3}, {1, 7}}));
  EXPECT_EQ(a.to_string(), "0:3,1:7");
  EXPECT_TRUE(a.has(1, 7));
  EXPECT_FALSE(a.has(1, 3));
  EXPECT_EQ(a.first_layer(2), 0);
  EXPECT_TRUE(parse_ablation("", "zero", c).empty());
}

TEST(AblationList, BadListsAreUsageErrors) {
  ModelConfig c;
  c.n_layer = 2, c.n_head = 8;
  for (const char* bad : {"2:0", "0:8", "0:1,0:1", "0", "a:b", "0:1,", ",0:1", "0:1,,1:2", "-1:0", "0:1:2", " 0:1"}) {
    try {
      parse_ablation(bad, "zero", c);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind, ErrorKind::Usage) << bad;
    }
  }
  EXPECT_THROW(parse_ablation("0:1", "half", c), Error);
}

TEST(AblationList, ToggleAddsAndRemoves) {
  Ablation a;
  a.toggle(1, 2);
  a.toggle(0, 5);
  EXPECT_EQ(a.to_string(), "0:5,1:2");
  a.toggle(1, 2);
  EXPECT_EQ(a.to_string(), "0:5");
}

}  // namespace
}  // namespace attnviz
