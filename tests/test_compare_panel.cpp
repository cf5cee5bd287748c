// The two-prompt panels' logic without ImGui. Compare prompts: one head's weights of A and
// B aligned from the start and their difference, against literal loops over the traces'
// own values (exact: the same floats subtracted); the first differing position and the
// note for different token counts. Activation patching (ui/patch_job): the job's grid is
// core's activation_patching for the same input, bit for bit (heads and residual stream);
// an unchanged patch (B = A) leaves every cell at A's metric bit for bit, with and without
// the passes run; bad input is a message; a newer request replaces the running one, a
// stopped one stays stopped until asked again. Prompt B through a second Worker reuses the
// model in memory.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/engine/engine.h"
#include "core/error.h"
#include "test_util.h"
#include "ui/state/app_state.h"
#include "ui/jobs/patch_job.h"
#include "ui/state/worker.h"

namespace attnviz::ui {
namespace {

std::shared_ptr<const Model> small_model() { return test::small_model("llama", 4, 2, 61, 31, "compare-panel"); }

Trace run(const std::shared_ptr<const Model>& m, const std::vector<int>& ids) {
  Engine engine(m, make_cpu_backend());
  return engine.run(ids);
}

void wait_idle(const PatchJob& job) {
  for (int k = 0; k < 4000 && !job.idle(); ++k) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(job.idle());
}

PatchQuery query(const std::shared_ptr<const Model>& m, std::vector<int> a, std::vector<int> b, PatchKind kind,
                 std::vector<int> targets = {}, int position = -1) {
  PatchQuery q;
  q.model = m;
  q.a = std::move(a);
  q.b = std::move(b);
  q.request.kind = kind;
  q.request.position = position;
  q.request.target_ids = std::move(targets);
  return q;
}

TEST(CompareView, AlignsFromTheStartAndSubtractsAsALiteralLoop) {
  const auto m = small_model();
  const std::vector<int> ia = test::random_ids(11, 61, 1);
  std::vector<int> ib = ia;
  ib[6] = (ib[6] + 5) % 61;
  ib.resize(8);  // B: 8 tokens, differing from A at position 6
  const Trace a = run(m, ia), b = run(m, ib);
  std::vector<float> sa, sb;
  for (int l = 0; l < 3; ++l)
    for (int h = 0; h < 4; ++h) {
      const LayerTrace& la = a.layers[static_cast<size_t>(l)];
      const LayerTrace& lb = b.layers[static_cast<size_t>(l)];
      const float* pa = la.head_values(Stage::Probs, h, sa);  // (11, 11)
      const float* pb = lb.head_values(Stage::Probs, h, sb);  // (8, 8)
      const std::vector<float> va = aligned_attention(CompareView::A, pa, 11, pb, 8);
      const std::vector<float> vb = aligned_attention(CompareView::B, pa, 11, pb, 8);
      const std::vector<float> vd = aligned_attention(CompareView::Difference, pa, 11, pb, 8);
      ASSERT_EQ(vd.size(), 64u);
      float before = 0.f, after = 0.f;  // |A − B| over the rows before and from the differing token
      for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j) {
          const size_t k = static_cast<size_t>(i * 8 + j);
          const float wa = la.value(Stage::Probs, h, i, j), wb = lb.value(Stage::Probs, h, i, j);
          EXPECT_EQ(va[k], wa) << l << ":" << h << " (" << i << ", " << j << ")";
          EXPECT_EQ(vb[k], wb);
          EXPECT_EQ(vd[k], wa - wb);
          (i < 6 ? before : after) = std::max(i < 6 ? before : after, std::abs(vd[k]));
        }
      EXPECT_EQ(before, 0.f) << "rows before the first differing token are the same computation";
      if (l == 0) {
        EXPECT_GT(after, 0.f) << "row 6 sees another key";
      }
    }
  // Equal sizes: the whole matrices.
  const float* p0 = a.layers[0].head_values(Stage::Probs, 0, sa);  // (11, 11)
  EXPECT_EQ(aligned_attention(CompareView::Difference, p0, 11, p0, 11), std::vector<float>(121, 0.f));
  EXPECT_TRUE(aligned_attention(CompareView::A, nullptr, 0, nullptr, 5).empty());
}

TEST(CompareView, FirstDifferenceAndTheNoteForDifferentCounts) {
  EXPECT_EQ(first_difference({1, 2, 3}, {1, 2, 3}), 3);
  EXPECT_EQ(first_difference({1, 2, 3}, {1, 9, 3}), 1);
  EXPECT_EQ(first_difference({1, 2, 3}, {1, 2}), 2);
  EXPECT_EQ(first_difference({}, {4}), 0);
  EXPECT_EQ(alignment_note(5, 5), "");
  const std::string n = alignment_note(12, 10);
  EXPECT_NE(n.find("A has 12 tokens, B 10"), std::string::npos) << n;
  EXPECT_NE(n.find("first 10 positions"), std::string::npos) << n;
  EXPECT_STREQ(compare_view_label(CompareView::Difference), "A \xE2\x88\x92 B");
}

TEST(PatchJob, TheGridIsCoresActivationPatchingBitForBit) {
  const auto m = small_model();
  const std::vector<int> a = test::random_ids(10, 61, 2);
  std::vector<int> b = a;
  b[3] = (b[3] + 7) % 61;
  b[8] = (b[8] + 1) % 61;
  PatchJob job;
  for (PatchKind kind : {PatchKind::Heads, PatchKind::Resid}) {
    for (const std::vector<int>& targets : {std::vector<int>{}, std::vector<int>{5, 9}}) {
      const PatchQuery q = query(m, a, b, kind, targets, kind == PatchKind::Resid ? 7 : -1);
      job.request(q);
      wait_idle(job);
      const PatchJob::Status st = job.status();
      ASSERT_TRUE(st.result) << st.error;
      EXPECT_TRUE(st.current);
      EXPECT_TRUE(st.result_query == q);
      EXPECT_EQ(st.error, "");
      EXPECT_EQ(st.done, st.total);
      const PatchResult ref = activation_patching(*m, a, b, q.request);
      EXPECT_EQ(st.result->grid, ref.grid);  // doubles compared exactly
      EXPECT_EQ(st.result->clean, ref.clean);
      EXPECT_EQ(st.result->other, ref.other);
      EXPECT_EQ(st.result->target_ids, ref.target_ids);
      EXPECT_EQ(st.result->position, kind == PatchKind::Resid ? 7 : 9);
      EXPECT_GT(st.result->passes, 0);
      // Something moved: B differs from A before the metric's position.
      double moved = 0;
      for (const auto& row : st.result->grid)
        for (double v : row) moved = std::max(moved, std::abs(v - st.result->clean));
      EXPECT_GT(moved, 0.0);
    }
  }
}

TEST(PatchJob, AnUnchangedPatchChangesNothingBitForBit) {
  const auto m = small_model();
  const std::vector<int> a = test::random_ids(9, 61, 3);
  PatchJob job;
  for (PatchKind kind : {PatchKind::Heads, PatchKind::Resid})
    for (bool incremental : {true, false}) {
      PatchQuery q = query(m, a, a, kind);
      q.request.incremental = incremental;
      job.request(q);
      wait_idle(job);
      const PatchJob::Status st = job.status();
      ASSERT_TRUE(st.result) << st.error;
      EXPECT_EQ(st.result->other, st.result->clean);
      for (const auto& row : st.result->grid)
        for (double v : row) EXPECT_EQ(v, st.result->clean) << (kind == PatchKind::Heads ? "heads" : "resid");
      if (incremental) EXPECT_EQ(st.result->passes, 0);  // every cell is A's own run
      else EXPECT_GT(st.result->passes, 0);
    }
}

TEST(PatchJob, BadInputIsAMessage) {
  const auto m = small_model();
  PatchJob job;
  job.request(query(m, test::random_ids(8, 61, 4), test::random_ids(6, 61, 5), PatchKind::Heads));
  wait_idle(job);
  EXPECT_FALSE(job.status().result);
  EXPECT_NE(job.status().error.find("different token counts"), std::string::npos) << job.status().error;
  job.request(query(m, test::random_ids(8, 61, 4), test::random_ids(8, 61, 5), PatchKind::Heads, {61}));
  wait_idle(job);
  EXPECT_NE(job.status().error.find("outside the vocabulary"), std::string::npos) << job.status().error;
  job.request(query(m, {}, {}, PatchKind::Resid));
  wait_idle(job);
  EXPECT_NE(job.status().error, "");
  job.request(PatchQuery{});  // no model: nothing starts
  EXPECT_TRUE(job.idle());

  EXPECT_NE(patch_alignment_problem(5, 0).find("no other prompt"), std::string::npos);
  EXPECT_NE(patch_alignment_problem(5, 7).find("cannot be aligned"), std::string::npos);
  EXPECT_EQ(patch_alignment_problem(5, 5), "");

  const auto tok = load_model("builtin:fortunes-en");
  EXPECT_EQ(patch_targets(*tok, "", ""), std::vector<int>{});
  EXPECT_EQ(patch_targets(*tok, "a", "").size(), 1u);
  EXPECT_EQ(patch_targets(*tok, "a", "b").size(), 2u);
  EXPECT_THROW(patch_targets(*tok, "", "b"), Error);
  EXPECT_THROW(patch_targets(*tok, "a long phrase", ""), Error);
  EXPECT_THROW(patch_targets(*m, "a", ""), Error);  // a random model has no tokenizer
}

TEST(PatchJob, ANewerRequestReplacesTheRunningOneAndStopStays) {
  const auto m = small_model();
  const std::vector<int> a = test::random_ids(30, 61, 6), b = test::random_ids(30, 61, 7);
  PatchJob job;
  const PatchQuery first = query(m, a, b, PatchKind::Resid), second = query(m, b, a, PatchKind::Resid);
  job.request(first);
  job.request(second);
  wait_idle(job);
  PatchJob::Status st = job.status();
  ASSERT_TRUE(st.result) << st.error;
  EXPECT_TRUE(st.result_query == second);
  EXPECT_EQ(st.result->grid, activation_patching(*m, b, a, second.request).grid);

  const PatchQuery third = query(m, a, b, PatchKind::Heads);
  job.request(third);
  job.stop();
  st = job.status();
  if (!st.current) {  // stopped before it finished (it may be done already on a fast machine)
    EXPECT_TRUE(st.stopped);
    EXPECT_TRUE(st.result_query == second);  // the last complete grid is kept
    job.request(third);                      // the same request: stays stopped
    EXPECT_TRUE(job.idle());
    job.request(third, /*again=*/true);
    wait_idle(job);
    st = job.status();
  }
  EXPECT_TRUE(st.current);
  EXPECT_FALSE(st.stopped);
  EXPECT_EQ(st.result->grid, activation_patching(*m, a, b, third.request).grid);
}

TEST(PatchCost, GrowsWithTheCellsThatRunAPass) {
  const auto m = small_model();
  const double clean = patch_cost_gflop(*m, 20, 20, -1, PatchKind::Heads);
  EXPECT_GT(clean, 0.0);
  EXPECT_DOUBLE_EQ(clean, patch_cost_gflop(*m, 20, 20, -1, PatchKind::Resid));  // B = A: the two clean runs
  EXPECT_LT(patch_cost_gflop(*m, 20, 15, -1, PatchKind::Heads), patch_cost_gflop(*m, 20, 2, -1, PatchKind::Heads));
  EXPECT_LT(patch_cost_gflop(*m, 20, 2, 5, PatchKind::Resid), patch_cost_gflop(*m, 20, 2, -1, PatchKind::Resid));
}

TEST(OtherPrompt, ASecondWorkerRunsPromptBThroughTheModelInMemory) {
  const auto m = load_model("builtin:fortunes-en");
  Worker w;
  Request r;
  r.model = m;
  r.model_spec = m->name;
  r.text = "The cat sat on the mat.";
  ASSERT_TRUE(w.wait_for(w.post(r), 60000));
  const auto snap = w.latest();
  ASSERT_TRUE(snap->trace) << snap->error;
  EXPECT_EQ(snap->model, m);  // the same model, not a second load
  EXPECT_EQ(snap->trace->tokens, m->tokenizer->encode(r.text));
  // Its tokens patched into A's run: the job's grid for the two windows.
  const std::vector<int> a = m->tokenizer->encode("The dog sat on the mat.");
  ASSERT_EQ(a.size(), snap->trace->tokens.size());
  PatchJob job;
  job.request(query(m, a, snap->trace->tokens, PatchKind::Heads));
  wait_idle(job);
  ASSERT_TRUE(job.status().result) << job.status().error;
  EXPECT_EQ(job.status().result->grid, activation_patching(*m, a, snap->trace->tokens, PatchRequest{}).grid);
}

}  // namespace
}  // namespace attnviz::ui
