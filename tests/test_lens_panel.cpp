// ui/lens_job: what the Logit lens and Direct logit attribution panels compute off the UI
// thread. The lens rows a panel asks for against core's logit_lens called position by
// position (and only those rows computed); rows carried over to a new trace only while their
// tokens and the next one hold (typing at the end), against a fresh computation; a trace
// without the residual stream gives the core's message; a newer request replaces a running
// one. The attribution job: the default target is the prediction, the parts add up to the
// logit, bad positions and targets are messages, refused families give the core's message.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "core/engine/engine.h"
#include "core/error.h"
#include "test_util.h"
#include "ui/jobs/lens_job.h"

namespace attnviz::ui {
namespace {

std::shared_ptr<const Model> small_model() {
  const auto c = test::small_config("llama", 3, 32, 4, 2, 61, 64);
  return load_model(test::make_model_dir(c, 29, "lens-panel"));
}

std::shared_ptr<const Trace> run(const std::shared_ptr<const Model>& m, const std::vector<int>& ids) {
  Engine engine(m, make_cpu_backend());
  return std::make_shared<const Trace>(engine.run(ids));
}

template <class Job>
void wait_idle(const Job& job) {
  for (int k = 0; k < 2000 && !job.idle(); ++k) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(job.idle());
}

// Row i of the job against logit_lens of that position alone, layer by layer.
void expect_row_is_lens(const Model& m, const Trace& tr, const LensRow& row, int i) {
  ASSERT_EQ(row.cells.size(), tr.layers.size());
  for (int l = 0; l < static_cast<int>(tr.layers.size()); ++l) {
    const LensCell ref = logit_lens(m, tr, l, {i}, kLensTop)[0];
    const LensCell& c = row.cells[static_cast<size_t>(l)];
    EXPECT_EQ(c.top_ids, ref.top_ids) << "position " << i << " layer " << l;
    ASSERT_EQ(c.top_probs.size(), ref.top_probs.size());
    for (size_t k = 0; k < c.top_probs.size(); ++k) EXPECT_NEAR(c.top_probs[k], ref.top_probs[k], 1e-6);
    EXPECT_NEAR(c.next_prob, ref.next_prob, 1e-6);
    EXPECT_EQ(c.next_rank, ref.next_rank);
  }
}

TEST(LensJob, ComputesTheRowsAskedForAndOnlyThose) {
  const auto m = small_model();
  const auto tr = run(m, test::random_ids(20, 61, 3));
  LensJob job;
  job.request(m, tr, {19, 4, 5, 6});
  wait_idle(job);
  EXPECT_EQ(job.error(), "");
  EXPECT_EQ(job.pending(), 0);
  for (int i = 0; i < tr->T(); ++i) {
    const auto row = job.row(i);
    const bool asked = i == 19 || (i >= 4 && i <= 6);
    ASSERT_EQ(row != nullptr, asked) << i;
    if (row) expect_row_is_lens(*m, *tr, *row, i);
  }
  EXPECT_EQ(job.row(19)->cells[0].next_rank, -1);  // the last position: nothing comes next
}

TEST(LensJob, TypingAtTheEndKeepsTheRowsWhoseTokensHold) {
  const auto m = small_model();
  std::vector<int> ids = test::random_ids(12, 61, 4);
  const auto a = run(m, ids);
  LensJob job;
  std::vector<int> all(12);
  for (int i = 0; i < 12; ++i) all[static_cast<size_t>(i)] = i;
  job.request(m, a, all);
  wait_idle(job);
  std::vector<std::shared_ptr<const LensRow>> before;
  for (int i = 0; i < 12; ++i) before.push_back(job.row(i));
  ids.push_back(7);
  const auto b = run(m, ids);
  job.request(m, b, {});  // a new trace: rows 0 … 10 hold (their next token is the same), 11 does not
  for (int i = 0; i < 11; ++i) EXPECT_EQ(job.row(i), before[static_cast<size_t>(i)]) << i;
  EXPECT_EQ(job.row(11), nullptr);
  all.push_back(12);
  job.request(m, b, all);
  wait_idle(job);
  for (int i = 0; i < 13; ++i) {
    ASSERT_TRUE(job.row(i)) << i;
    expect_row_is_lens(*m, *b, *job.row(i), i);  // the kept rows are those of a fresh run
  }
  EXPECT_GE(job.row(11)->cells[0].next_rank, 0);  // 11 now has a next token
}

TEST(LensJob, RowCarriesOnlyWithTheSameTokensWindowAndAblation) {
  const auto m = small_model();
  const std::vector<int> ids = test::random_ids(10, 61, 5);
  const auto a = run(m, ids);
  std::vector<int> changed = ids;
  changed[4] = (changed[4] + 1) % 61;
  const auto b = run(m, changed);
  EXPECT_TRUE(lens_row_carries(*a, *b, 2));
  EXPECT_FALSE(lens_row_carries(*a, *b, 3));  // its next token changed
  EXPECT_FALSE(lens_row_carries(*a, *b, 4));
  EXPECT_FALSE(lens_row_carries(*a, *b, 9));
  EXPECT_FALSE(lens_row_carries(*a, *b, 10));  // outside the text
  Trace ablated = *a;
  ablated.ablation.toggle(0, 1);
  EXPECT_FALSE(lens_row_carries(*a, ablated, 0));
  Trace shifted = *a;
  shifted.dropped = 1;
  EXPECT_FALSE(lens_row_carries(*a, shifted, 0));
}

TEST(LensJob, ATraceWithoutTheResidualStreamGivesTheCoresMessage) {
  const auto m = small_model();
  Trace t = *run(m, test::random_ids(8, 61, 6));
  for (LayerTrace& lt : t.layers) lt.resid = Tensor();
  t.final_resid = Tensor();
  t.final_hidden = Tensor();
  const auto tr = std::make_shared<const Trace>(std::move(t));
  LensJob job;
  job.request(m, tr, {0, 1});
  wait_idle(job);
  EXPECT_NE(job.error().find("residual stream"), std::string::npos) << job.error();
  EXPECT_EQ(job.row(0), nullptr);
  job.request(m, tr, {0, 1});  // the same rows again: no new attempt every frame
  EXPECT_TRUE(job.idle());
}

TEST(LensJob, ANewerTraceReplacesTheRunningRequest) {
  const auto m = small_model();
  const auto a = run(m, test::random_ids(40, 61, 7)), b = run(m, test::random_ids(40, 61, 8));
  std::vector<int> all(40);
  for (int i = 0; i < 40; ++i) all[static_cast<size_t>(i)] = i;
  LensJob job;
  job.request(m, a, all);
  job.request(m, b, all);
  wait_idle(job);
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(job.row(i)) << i;
    expect_row_is_lens(*m, *b, *job.row(i), i);
  }
}

TEST(AttributionJob, DefaultsToThePredictionAtTheLastPositionAndSumsToTheLogit) {
  const auto m = small_model();
  const auto tr = run(m, test::random_ids(9, 61, 9));
  AttributionJob job;
  job.request({m, tr, -1, {}});
  wait_idle(job);
  const auto st = job.status();
  ASSERT_TRUE(st.result) << st.error;
  EXPECT_EQ(st.result->position, 8);
  EXPECT_EQ(st.result->target_ids, std::vector<int>{predicted_token(*m, *tr, 8)});
  EXPECT_NEAR(st.result->sum, st.result->logit, 1e-4 * std::max(1e-2, std::abs(st.result->logit)));
  const Attribution ref = direct_logit_attribution(*m, *tr, 8, st.result->target_ids);
  EXPECT_EQ(st.result->heads, ref.heads);
  job.request({m, tr, 3, {5, 9}});
  wait_idle(job);
  const auto d = job.status();
  ASSERT_TRUE(d.result) << d.error;
  EXPECT_EQ(d.result->position, 3);
  EXPECT_EQ(d.result->target_ids, (std::vector<int>{5, 9}));
  EXPECT_NEAR(d.result->sum, d.result->logit, 1e-4 * std::max(1e-2, std::abs(d.result->logit)));
}

TEST(AttributionJob, BadPositionAndRefusedFamilyAreMessages) {
  const auto m = small_model();
  const auto tr = run(m, test::random_ids(9, 61, 10));
  AttributionJob job;
  job.request({m, tr, 9, {}});
  wait_idle(job);
  EXPECT_FALSE(job.status().result);
  EXPECT_NE(job.status().error.find("outside the text"), std::string::npos) << job.status().error;
  // A block that norms its attention output (Gemma 2/3, OLMo 2): the core refuses, and says why.
  auto post = std::make_shared<Model>(*m);
  post->weights.layers[0].post_attn_norm = Vec::Ones(m->config.n_embd);
  job.request({post, tr, -1, {}});
  wait_idle(job);
  EXPECT_FALSE(job.status().result);
  EXPECT_NE(job.status().error.find("not available"), std::string::npos) << job.status().error;
}

TEST(AttributionTarget, OneTokenOfTheTokenizerOrAMessage) {
  const auto m = load_model("builtin:fortunes-en");
  const int id = target_token_id(*m, "a");
  EXPECT_EQ(m->tokenizer->encode_with("a", false), std::vector<int>{id});
  EXPECT_THROW(target_token_id(*m, ""), Error);
  try {
    target_token_id(*m, "a long phrase");
    FAIL() << "several tokens accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not one"), std::string::npos) << e.what();
  }
  const auto no_tok = small_model();  // a random model has no tokenizer
  if (!no_tok->tokenizer) EXPECT_THROW(target_token_id(*no_tok, "a"), Error);
}

}  // namespace
}  // namespace attnviz::ui
