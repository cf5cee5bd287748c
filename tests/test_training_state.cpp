// The Training panel's logic without a window (ui/training_state.h): the form becomes the
// session options the CLI preset gives, the buttons follow the state, the timeline snaps
// to kept snapshots, the plotted series are the published scores, and the text is fitted
// to the run's vocabulary.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/test_util.h"
#include "ui/state/training_state.h"

namespace attnviz::ui {
namespace {

TEST(TrainingForm, ThePresetGivesTheCliPresetsOptions) {
  const SessionOptions s = session_options(form_for_preset("induction-head"));
  TrainOptions cli;
  apply_train_preset("induction-head", cli);
  EXPECT_EQ(s.train.arch, cli.arch);
  EXPECT_EQ(s.train.layers, cli.layers);
  EXPECT_EQ(s.train.embd, cli.embd);
  EXPECT_EQ(s.train.heads, cli.heads);
  EXPECT_EQ(s.train.block_size, cli.block_size);
  EXPECT_EQ(s.train.steps, cli.steps);
  EXPECT_EQ(s.train.lr, cli.lr);
  EXPECT_EQ(s.train.repeat_frac, cli.repeat_frac);
  EXPECT_EQ(s.train.corpus, cli.corpus);
  EXPECT_EQ(s.train.batch, cli.batch);
  EXPECT_EQ(s.train.warmup, cli.warmup);
  EXPECT_THROW(form_for_preset("no-such"), Error);
}

TEST(TrainingForm, TheFieldsAreCheckedIntoRange) {
  TrainingForm f = form_for_preset("induction-head");
  f.preset.clear();
  f.train.repeat_frac = 1.5f;
  f.train.steps = 77;
  f.budget_mb = 3;
  f.publish_every = 0;
  f.snapshot_every = -4;
  const SessionOptions s = session_options(f);
  EXPECT_EQ(s.train.repeat_frac, 1.f);
  EXPECT_EQ(s.train.eval_every, 77);  // validation at least at the end
  EXPECT_EQ(s.snapshot_budget, 3u << 20);
  EXPECT_EQ(s.publish_every, 1);
  EXPECT_EQ(s.snapshot_every, 1);
}

TEST(TrainingButtons, FollowTheSessionState) {
  auto b = buttons_for(SessionState::Idle, false);
  EXPECT_TRUE(b.start);
  EXPECT_FALSE(b.pause || b.resume || b.stop || b.reset || b.save);
  b = buttons_for(SessionState::Running, true);
  EXPECT_TRUE(b.pause && b.stop);
  EXPECT_FALSE(b.start || b.resume || b.save);
  b = buttons_for(SessionState::Paused, true);
  EXPECT_TRUE(b.resume && b.stop && b.save && b.reset);
  EXPECT_FALSE(b.start || b.pause);
  for (SessionState s : {SessionState::Finished, SessionState::Stopped, SessionState::Failed}) {
    b = buttons_for(s, true);
    EXPECT_TRUE(b.start && b.save && b.reset) << session_state_name(s);
    EXPECT_FALSE(b.pause || b.resume || b.stop) << session_state_name(s);
  }
}

TEST(TrainingTimeline, SnapsToTheNearestKeptStep) {
  const std::vector<int> kept = {0, 20, 35, 40};
  EXPECT_EQ(nearest_kept_step(kept, 0), 0);
  EXPECT_EQ(nearest_kept_step(kept, 9), 0);
  EXPECT_EQ(nearest_kept_step(kept, 10), 0);  // a tie goes to the earlier
  EXPECT_EQ(nearest_kept_step(kept, 11), 20);
  EXPECT_EQ(nearest_kept_step(kept, 37), 35);
  EXPECT_EQ(nearest_kept_step(kept, 1000), 40);
  EXPECT_EQ(nearest_kept_step({}, 5), -1);
}

TEST(TrainingTimeline, FilmstripStepsSpreadFromFirstToLast) {
  const std::vector<int> kept = {0, 50, 100, 150, 200, 250, 300, 350, 400};
  EXPECT_EQ(filmstrip_steps(kept, 3), (std::vector<int>{0, 200, 400}));
  EXPECT_EQ(filmstrip_steps(kept, 5), (std::vector<int>{0, 100, 200, 300, 400}));
  EXPECT_EQ(filmstrip_steps(kept, 20), kept);
  EXPECT_EQ(filmstrip_steps(kept, 1), (std::vector<int>{400}));
  EXPECT_TRUE(filmstrip_steps({}, 4).empty());
}

SessionStatus status_with_scores() {
  SessionStatus s;
  s.steps = 300;
  for (int k = 0; k < 4; ++k) {
    ScorePoint p;
    p.step = 100 * k;
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < 2; ++h) {
        HeadScore hs;
        hs.layer = l;
        hs.head = h;
        hs.previous_token = 0.1f * k + 0.01f * (2 * l + h);
        hs.induction = l == 1 && h == 1 ? 0.2f * k : 0.05f;
        p.heads.push_back(hs);
      }
    s.scores.push_back(p);
  }
  s.induction_step = 200;
  s.induction_seconds = 41.6;
  return s;
}

TEST(TrainingPlots, SeriesAreThePublishedScores) {
  const SessionStatus s = status_with_scores();
  EXPECT_EQ(score_steps(s), (std::vector<int>{0, 100, 200, 300}));
  const auto prev = head_series(s, 2, false);  // layer 1 head 0
  ASSERT_EQ(prev.size(), 4u);
  for (int k = 0; k < 4; ++k) EXPECT_FLOAT_EQ(prev[static_cast<size_t>(k)], 0.1f * k + 0.02f);
  const auto ind = head_series(s, 3, true);
  EXPECT_FLOAT_EQ(ind[3], 0.6f);
  EXPECT_TRUE(head_series(s, 4, true).empty());  // no such head
  EXPECT_EQ(best_induction_head(s), 3);
  EXPECT_EQ(induction_note(s), "induction head formed at step 200 (42 s): layer 1 head 1, score 0.40");
  EXPECT_EQ(induction_note(SessionStatus{}), "");
  EXPECT_EQ(best_induction_head(SessionStatus{}), -1);
}

TEST(TrainingText, IsFittedToTheVocabulary) {
  const std::vector<std::string> vocab = {"\n", " ", ".", "a", "c", "e", "h", "s", "t"};
  EXPECT_EQ(text_for_vocabulary("the cat sat.", vocab), "the cat sat.");
  EXPECT_EQ(text_for_vocabulary("The Cat SAT!", vocab), "the cat sat");
  EXPECT_EQ(text_for_vocabulary("", vocab), "acehstacehst");
  EXPECT_EQ(text_for_vocabulary("\xe4\xb8\xad", vocab), "acehstacehst");
  EXPECT_EQ(text_for_vocabulary("\xff", vocab), "acehstacehst");  // not UTF-8
}

TEST(TrainingFilmstrip, TheGuiWritesKeptSnapshotsWithStepLabels) {
  const std::string dir = test::temp_dir("gui_filmstrip");
  std::string text;
  for (int i = 0; i < 120; ++i) text += "the cat sat on the mat. ";
  test::write_bytes(dir + "/c.txt", text);
  TrainingSession session;
  EXPECT_THROW(write_session_filmstrip(session, 3, "the cat", 0, 0, dir + "/none.png"), Error);
  TrainingForm f = form_for_preset("induction-head");
  f.train.corpus = dir + "/c.txt";
  f.train.embd = 16;
  f.train.block_size = 16;
  f.train.batch = 2;
  f.train.steps = 40;
  f.snapshot_every = 10;
  session.start(session_options(f));
  ASSERT_TRUE(session.wait_idle(60000));
  const std::string msg = write_session_filmstrip(session, 3, "the cat sat", 1, 2, dir + "/f.svg");
  EXPECT_EQ(msg, "wrote " + dir + "/f.svg: layer 1 head 2 at 3 steps");
  const std::string svg = test::read_file(dir + "/f.svg");
  for (const char* cap : {">step 0<", ">step 20<", ">step 40<"}) EXPECT_NE(svg.find(cap), std::string::npos) << cap;
  EXPECT_EQ(svg.find(">step 10<"), std::string::npos);
  try {
    write_session_filmstrip(session, 3, "THE CAT", 1, 2, dir + "/g.svg");
    ADD_FAILURE() << "a character outside the vocabulary must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'T'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(write_session_filmstrip(session, 3, "the cat", 2, 0, dir + "/h.svg"), Error);  // no layer 2
}

}  // namespace
}  // namespace attnviz::ui
