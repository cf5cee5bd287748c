// Head statistics on small fixed attention matrices against values worked out by hand, and
// the next-token loss and head importance against the literal reference.
#include <gtest/gtest.h>

#include <cmath>

#include "core/engine/engine.h"
#include "core/engine/head_scores.h"
#include "core/engine/head_summary.h"
#include "core/engine/importance.h"
#include "core/engine/reference.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

// One layer, two heads, T = 3, tokens 7 8 7.
//   head 0: rows [1 0 0], [.5 .5 0], [.25 .25 .5]
//   head 1: rows [1 0 0], [1 0 0],   [0 1 0]        (previous token, one-hot)
Trace fixed_trace() {
  Trace t;
  t.tokens = {7, 8, 7};
  LayerTrace l;
  l.probs = Tensor{{2, 3, 3}, {1, 0, 0, .5f, .5f, 0, .25f, .25f, .5f,  //
                               1, 0, 0, 1, 0, 0, 0, 1, 0}};
  t.layers.push_back(l);
  return t;
}

// Enough heads × rows that score_heads splits them over threads (4 layers × 8 heads × 2048
// rows), from row_stats filled by hand: each head's means written out in double, in order.
TEST(HeadStatistics, ManyHeadsMatchPlainSums) {
  const int L = 4, H = 8, T = 2048;
  Trace t;
  t.tokens.assign(T, 1);
  uint32_t seed = 99;
  for (int l = 0; l < L; ++l) {
    LayerTrace lt;
    lt.q = Tensor{{H, T, 1}, FloatBuf(static_cast<size_t>(H) * T, 0.f)};
    lt.row_stats = Tensor{{H, T, kRowStats}, FloatBuf(static_cast<size_t>(H) * T * kRowStats)};
    for (size_t i = 0; i < lt.row_stats.data.size(); ++i) {
      seed = seed * 1664525u + 1013904223u;
      lt.row_stats.data[i] = i % kRowStats == kInduction && seed % 3 == 0 ? std::nanf("")  // no induction target
                                                                           : static_cast<float>(seed >> 8) / (1u << 24);
    }
    t.layers.push_back(std::move(lt));
  }
  const auto s = score_heads(t);
  ASSERT_EQ(s.size(), static_cast<size_t>(L * H));
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      const HeadScore& got = s[static_cast<size_t>(l * H + h)];
      EXPECT_EQ(got.layer, l);
      EXPECT_EQ(got.head, h);
      double sum[kRowStats] = {};
      int ind = 0;
      for (int i = 1; i < T; ++i)
        for (int k = 0; k < kRowStats; ++k) {
          const float v = t.layers[l].row_stats.at(h, i, k);
          if (k == kInduction) {
            if (std::isnan(v)) continue;
            ++ind;
          }
          sum[k] += v;
        }
      EXPECT_EQ(got.previous_token, static_cast<float>(sum[kPrevious] / (T - 1))) << l << " " << h;
      EXPECT_EQ(got.first_token, static_cast<float>(sum[kFirst] / (T - 1)));
      EXPECT_EQ(got.self, static_cast<float>(sum[kSelf] / (T - 1)));
      EXPECT_EQ(got.entropy_bits, static_cast<float>(sum[kEntropyBits] / (T - 1)));
      EXPECT_EQ(got.mean_distance, static_cast<float>(sum[kDistance] / (T - 1)));
      EXPECT_EQ(got.induction, static_cast<float>(sum[kInduction] / ind));
    }
}

TEST(HeadStatistics, MatchHandComputedValues) {
  const auto s = score_heads(fixed_trace());
  ASSERT_EQ(s.size(), 2u);
  // Rows 1 and 2 count (row 0 can only look at itself).
  // head 0: entropy row 1 = 1 bit, row 2 = .5 + .5 + .5 = 1.5 bits → 1.25
  //         distance row 1 = .5·1 = .5, row 2 = .25·2 + .25·1 = .75 → .625
  //         previous (.5 + .25)/2, first (.5 + .25)/2, self (.5 + .5)/2,
  //         induction: row 2 (token 7 seen at 0) → weight on position 1 = .25
  constexpr float kTol = 1e-6f;
  EXPECT_NEAR(s[0].entropy_bits, 1.25f, kTol);
  EXPECT_NEAR(s[0].mean_distance, 0.625f, kTol);
  EXPECT_NEAR(s[0].previous_token, 0.375f, kTol);
  EXPECT_NEAR(s[0].first_token, 0.375f, kTol);
  EXPECT_NEAR(s[0].self, 0.5f, kTol);
  EXPECT_NEAR(s[0].induction, 0.25f, kTol);
  // head 1: one-hot on the previous token: 0 bits, distance 1.
  EXPECT_NEAR(s[1].entropy_bits, 0.f, kTol);
  EXPECT_NEAR(s[1].mean_distance, 1.f, kTol);
  EXPECT_NEAR(s[1].previous_token, 1.f, kTol);
  EXPECT_NEAR(s[1].first_token, 0.5f, kTol);
  EXPECT_NEAR(s[1].induction, 1.f, kTol);
}

TEST(HeadStatistics, UniformRowsHaveLogTEntropyAndHalfRowDistance) {
  // Uniform causal attention over T = 5: row i has entropy log2(i+1), distance i/2.
  const int T = 5;
  Trace t;
  t.tokens = {1, 2, 3, 4, 5};
  LayerTrace l;
  l.probs = Tensor{{1, T, T}, FloatBuf(T * T, 0.f)};
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= i; ++j) l.probs.at(0, i, j) = 1.f / (i + 1);
  t.layers.push_back(l);
  const auto s = score_heads(t)[0];
  EXPECT_NEAR(s.entropy_bits, (1 + std::log2(3.) + 2 + std::log2(5.)) / 4, 1e-6);
  EXPECT_NEAR(s.mean_distance, (0.5 + 1 + 1.5 + 2) / 4, 1e-6);
  EXPECT_EQ(s.induction, -1.f);  // no token repeats
}

TEST(NextTokenLoss, MatchesHandComputedValues) {
  Trace t;
  t.tokens = {0, 1, 2};
  // Row 0: uniform over 3 → −log(1/3); row 1: logits (0, ln 3, 0), target 2 → log 5.
  t.logits = Tensor{{3, 3}, {0, 0, 0, 0, static_cast<float>(std::log(3.0)), 0, 9, 9, 9}};
  EXPECT_NEAR(mean_next_token_loss(t), (std::log(3.0) + std::log(5.0)) / 2, 1e-6);
  EXPECT_NEAR(next_token_loss(t.logits.data.data() + 3, 3, 1), std::log(5.0 / 3.0), 1e-6);
  Trace one;
  one.tokens = {4};
  EXPECT_EQ(mean_next_token_loss(one), 0.0);
}

TEST(HeadImportance, EachEntryIsTheReferenceLossWithThatHeadAblated) {
  const auto c = test::small_config("llama", 2, 24, 3, 1, 17, 16);
  const auto m = load_model(test::make_model_dir(c, 23, "importance"));
  const auto ids = test::random_ids(10, 17, 4);
  Engine e(m, make_cpu_backend());
  const Ablation before{AblationMode::Mean, {{1, 1}}};
  e.set_ablation(before);
  int calls = 0, last_total = 0;
  const ImportanceGrid g = head_importance(e, ids, [&](int done, int total) {
    ++calls, last_total = total;
    EXPECT_EQ(done, calls);
    return true;
  });
  EXPECT_TRUE(g.complete);
  EXPECT_EQ(calls, 1 + 2 * 2 * 3);
  EXPECT_EQ(last_total, calls);
  EXPECT_EQ(e.ablation(), before) << "the engine's ablation is restored";
  const double base = mean_next_token_loss(reference_forward(*m, ids));
  EXPECT_NEAR(g.base_loss, base, 1e-5);
  ASSERT_EQ(g.heads.size(), 6u);
  for (const auto& h : g.heads) {
    const double zero = mean_next_token_loss(reference_forward(*m, ids, {AblationMode::Zero, {{h.layer, h.head}}}));
    const double mean = mean_next_token_loss(reference_forward(*m, ids, {AblationMode::Mean, {{h.layer, h.head}}}));
    EXPECT_NEAR(h.zero, zero - base, 1e-5) << h.layer << ":" << h.head;
    EXPECT_NEAR(h.mean, mean - base, 1e-5) << h.layer << ":" << h.head;
  }
  // Stopping early leaves the grid incomplete.
  const ImportanceGrid part = head_importance(e, ids, [](int done, int) { return done < 4; });
  EXPECT_FALSE(part.complete);
  EXPECT_EQ(part.heads.size(), 1u);
}

}  // namespace
}  // namespace attnviz
