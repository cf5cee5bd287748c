// The fast CPU path (Eigen) against the literal reference loops (core/engine/reference.cpp),
// on random models: gpt2, llama with GQA and MQA, odd sizes, T = 1.
// Tolerance: relative error (max|fast − ref| / max|ref| per tensor) ≤ 1e-4, −inf identical.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/engine/engine.h"
#include "core/engine/reference.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

struct Case {
  const char* name;
  const char* arch;
  int layers, embd, heads, kv_heads, vocab, ctx, T;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ForwardVsReference : public ::testing::TestWithParam<Case> {};

using test::random_ids;

TEST_P(ForwardVsReference, EveryRecordedMatrixMatches) {
  const Case k = GetParam();
  const auto c = test::small_config(k.arch, k.layers, k.embd, k.heads, k.kv_heads, k.vocab, k.ctx);
  const auto model = load_model(test::make_model_dir(c, 42, k.name));
  const auto ids = random_ids(k.T, k.vocab, 7);
  Engine engine(model, make_cpu_backend());
  const Trace& fast = engine.run(ids);
  const Trace ref = reference_forward(*model, ids);
  EXPECT_EQ(test::compare_traces(fast, ref, 1e-4), "") << k.name;

  // Structural facts the heatmaps rely on.
  for (const auto& l : fast.layers) {
    ASSERT_EQ(l.probs.shape, (std::vector<int64_t>{k.heads, k.T, k.T}));
    ASSERT_EQ(l.k.shape, (std::vector<int64_t>{c.n_kv_head, k.T, c.head_size}));
    for (int h = 0; h < k.heads; ++h)
      for (int i = 0; i < k.T; ++i) {
        double sum = 0;
        for (int j = 0; j < k.T; ++j) {
          sum += l.probs.at(h, i, j);
          EXPECT_EQ(std::isinf(l.value(Stage::Masked, h, i, j)), j > i);
          EXPECT_FLOAT_EQ(l.value(Stage::Scaled, h, i, j), l.scores.at(h, i, j) / std::sqrt(static_cast<float>(c.head_size)));
          if (j <= i) {
            EXPECT_EQ(l.value(Stage::Masked, h, i, j), l.value(Stage::Scaled, h, i, j));
          }
          if (j > i) {
            EXPECT_EQ(l.probs.at(h, i, j), 0.f);
          }
        }
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
  }
}

INSTANTIATE_TEST_SUITE_P(
    RandomModels, ForwardVsReference,
    ::testing::Values(Case{"gpt2", "gpt2", 2, 32, 4, 4, 40, 32, 13},
                      Case{"gpt2_odd", "gpt2", 1, 30, 3, 3, 23, 16, 9},
                      Case{"gpt2_T1", "gpt2", 2, 16, 2, 2, 11, 8, 1},
                      Case{"llama_gqa", "llama", 2, 48, 6, 2, 50, 64, 17},
                      Case{"llama_mqa_odd", "llama", 1, 36, 6, 1, 29, 16, 7},
                      Case{"llama_T1", "llama", 2, 32, 4, 2, 19, 8, 1}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Forward, ResultsDependOnTheWeightsOfTheRightKvHead) {
  // Zeroing KV head 1's key weights must change only the query heads that read it
  // (h / group_size == 1), proving the GQA mapping rather than assuming it.
  auto c = test::small_config("llama", 1, 32, 4, 2, 20, 16);
  auto model = std::const_pointer_cast<Model>(load_model(test::make_model_dir(c, 9, "gqa")));
  const auto ids = random_ids(6, 20, 3);
  Engine before(model, make_cpu_backend());
  const Trace t0 = before.run(ids);
  model->weights.layers[0].wk.f32.rightCols(8).setZero();  // KV head 1 = columns 8..15
  Engine after(model, make_cpu_backend());
  const Trace t1 = after.run(ids);
  for (int h = 0; h < 4; ++h) {
    const bool reads_kv1 = h / 2 == 1;
    float diff = 0;
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j <= i; ++j) diff = std::max(diff, std::abs(t0.layers[0].scores.at(h, i, j) - t1.layers[0].scores.at(h, i, j)));
    if (reads_kv1) EXPECT_GT(diff, 1e-3) << "head " << h;
    else EXPECT_EQ(diff, 0.f) << "head " << h;
  }
}

}  // namespace
}  // namespace attnviz
