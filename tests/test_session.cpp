// The training session (core/train/session.h) against the CLI trainer (train()): the same
// losses step for step, exact pause/resume, snapshots holding the trainer's exact weights,
// the snapshot budget, a NaN stop, and clear errors for bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <random>

#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/error.h"
#include "core/train/session.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

std::string write_corpus(const std::string& dir) { return test::write_sentence_corpus(dir, "a", 300, 7); }

TrainOptions tiny(const std::string& corpus, int steps) {
  TrainOptions o;
  o.arch = "llama";
  o.layers = 2;
  o.embd = 16;
  o.heads = 4;
  o.kv_heads = 2;
  o.block_size = 16;
  o.batch = 4;
  o.steps = steps;
  o.warmup = 5;
  o.lr = 1e-2f;
  o.eval_every = 10;
  o.eval_batches = 2;
  o.repeat_frac = 0.5f;
  o.corpus = corpus;
  return o;
}

// The losses and validation losses train() reports, and its checkpoint at every eval.
struct CliRun {
  std::vector<float> loss;
  std::vector<std::pair<int, float>> val;
};
CliRun run_cli(TrainOptions o, const std::string& out, const std::string& copies = "") {
  o.out = out;
  CliRun r;
  train(o, [&](const TrainProgress& p) {
    if (p.start) return;
    r.loss.push_back(static_cast<float>(p.loss));
    if (p.evaluated) r.val.emplace_back(p.step, static_cast<float>(p.val_loss));
    if (p.saved && !copies.empty())
      std::filesystem::copy(out, copies + "/step" + std::to_string(p.step), std::filesystem::copy_options::recursive);
  });
  return r;
}

// Every float of two weight sets, exactly.
void expect_same_weights(const ModelWeights& a, const ModelWeights& b, const std::string& what) {
  const auto A = weight_spans(a), B = weight_spans(b);
  ASSERT_EQ(A.size(), B.size()) << what;
  for (size_t t = 0; t < A.size(); ++t) {
    ASSERT_EQ(A[t].numel, B[t].numel) << what;
    const auto *a_f = static_cast<const float*>(A[t].data), *b_f = static_cast<const float*>(B[t].data);
    for (long long i = 0; i < A[t].numel; ++i)
      ASSERT_EQ(a_f[i], b_f[i]) << what << " tensor " << t << "[" << i << "]";
  }
}

std::shared_ptr<const SessionStatus> run_to_end(TrainingSession& s, const SessionOptions& o) {
  s.start(o);
  EXPECT_TRUE(s.wait_idle(60000));
  return s.status();
}

// A tiny run of `steps` in a fresh folder, already trained by the CLI trainer into dir/cli.
struct Compared {
  std::string dir;
  CliRun cli;
  SessionOptions o;
};
Compared compared_run(const std::string& tag, int steps) {
  Compared c;
  c.dir = test::temp_dir(tag);
  c.o.train = tiny(write_corpus(c.dir), steps);
  c.cli = run_cli(c.o.train, c.dir + "/cli");
  return c;
}

// The session's losses and final weights are the CLI trainer's, exactly.
void expect_same_run(const SessionStatus& st, const Compared& c) {
  ASSERT_EQ(st.train_loss.size(), c.cli.loss.size());
  for (size_t i = 0; i < c.cli.loss.size(); ++i) EXPECT_EQ(st.train_loss[i], c.cli.loss[i]) << "step " << i + 1;
  ASSERT_TRUE(st.model);
  expect_same_weights(st.model->weights, load_model(c.dir + "/cli")->weights, "final weights");
}

TEST(TrainingSession, StepsEqualTheCliTrainerStepForStep) {
  Compared c = compared_run("session_equal", 30);
  const CliRun& cli = c.cli;
  TrainingSession s;
  SessionOptions o = c.o;
  o.publish_every = 7;
  const auto st = run_to_end(s, o);
  EXPECT_EQ(st->state, SessionState::Finished);
  EXPECT_EQ(st->step, 30);
  expect_same_run(*st, c);
  // Validation before training, then at 10, 20, 30 as the trainer does.
  ASSERT_EQ(st->val_steps, (std::vector<int>{0, 10, 20, 30}));
  for (size_t k = 0; k < cli.val.size(); ++k) EXPECT_EQ(st->val_loss[k + 1], cli.val[k].second);
  EXPECT_EQ(st->model_step, 30);
  // Scores were published every 7 steps and at the end.
  std::vector<int> scored;
  for (const auto& p : st->scores) scored.push_back(p.step);
  EXPECT_EQ(scored, (std::vector<int>{0, 7, 14, 21, 28, 30}));
  EXPECT_EQ(st->scores.back().heads.size(), 8u);
}

TEST(TrainingSession, PauseAndResumeAreExact) {
  const Compared c = compared_run("session_pause", 24);
  const SessionOptions& o = c.o;
  TrainingSession s;
  s.pause_at(9);
  s.start(o);
  ASSERT_TRUE(s.wait_idle(60000));
  auto st = s.status();
  ASSERT_EQ(st->state, SessionState::Paused);
  EXPECT_EQ(st->step, 9);
  EXPECT_EQ(st->train_loss.size(), 9u);
  EXPECT_THROW(s.start(o), Error);  // no second run while one is paused
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(s.status()->step, 9);  // paused means no steps
  s.resume();
  s.pause();  // at whatever step the thread is: still exact
  ASSERT_TRUE(s.wait_idle(60000));
  s.resume();
  ASSERT_TRUE(s.wait_idle(60000));
  st = s.status();
  ASSERT_EQ(st->state, SessionState::Finished);
  expect_same_run(*st, c);
}

TEST(TrainingSession, SnapshotsHoldTheTrainersExactWeights) {
  const std::string dir = test::temp_dir("session_snap");
  const TrainOptions t = tiny(write_corpus(dir), 30);
  std::filesystem::create_directories(dir + "/copies");
  run_cli(t, dir + "/cli", dir + "/copies");
  TrainingSession s;
  SessionOptions o;
  o.train = t;
  o.snapshot_every = 10;
  const auto st = run_to_end(s, o);
  ASSERT_EQ(st->snapshot_steps, (std::vector<int>{0, 10, 20, 30}));
  for (int step : {10, 20, 30}) {
    const auto m = s.snapshot(step);
    ASSERT_TRUE(m) << step;
    expect_same_weights(m->weights, load_model(dir + "/copies/step" + std::to_string(step))->weights,
                        "snapshot " + std::to_string(step));
  }
  EXPECT_EQ(s.snapshot(5), nullptr);
  // Step 0 is the initial weights of the seed.
  const ModelConfig c = make_train_config(t, s.snapshot(0)->config.vocab_size);
  expect_same_weights(s.snapshot(0)->weights, weights_from_params(init_params(c, t.seed)), "step 0");
  // A snapshot runs in the engine, and a saved one opens like any model.
  Engine e(s.snapshot(10), make_cpu_backend());
  EXPECT_EQ(e.run_text("a cat sat").T(), 9);
  s.save(dir + "/saved10", 10);
  expect_same_weights(load_model(dir + "/saved10")->weights, s.snapshot(10)->weights, "saved snapshot");
  // The whole run saved with its optimizer state: the CLI trainer resumes it (all 30 steps
  // done, so it only writes the checkpoint again, with the same weights).
  s.save(dir + "/run");
  TrainOptions again = t;
  again.resume = dir + "/run";
  again.out = dir + "/resumed";
  train(again, nullptr);
  expect_same_weights(load_model(dir + "/resumed")->weights, st->model->weights, "resumed saved run");
}

TEST(TrainingSession, TheBudgetThinsTheOldestSnapshotsFirst) {
  const std::string dir = test::temp_dir("session_budget");
  TrainingSession s;
  SessionOptions o;
  o.train = tiny(write_corpus(dir), 40);
  o.snapshot_every = 5;
  s.start(o);
  ASSERT_TRUE(s.wait_idle(60000));
  const size_t each = static_cast<size_t>(s.status()->model->parameter_count()) * sizeof(float);
  EXPECT_EQ(s.status()->snapshot_steps.size(), 9u);  // 0, 5, ..., 40 within the default budget
  o.snapshot_budget = 4 * each;
  s.start(o);
  ASSERT_TRUE(s.wait_idle(60000));
  auto st = s.status();
  // 0 5 10 15 | +20 → drop 5 | +25 → drop 15 | +30 → drop 25 | +35 → drop 30 | +40 → drop 10
  EXPECT_EQ(st->snapshot_steps, (std::vector<int>{0, 20, 35, 40}));
  EXPECT_EQ(st->snapshot_bytes, 4 * each);
  EXPECT_TRUE(st->message.empty()) << st->message;
  o.snapshot_budget = each / 2;
  s.start(o);
  ASSERT_TRUE(s.wait_idle(60000));
  st = s.status();
  EXPECT_EQ(st->snapshot_steps, (std::vector<int>{40}));
  EXPECT_NE(st->message.find("snapshot budget"), std::string::npos) << st->message;
  EXPECT_EQ(st->state, SessionState::Finished);
}

TEST(TrainingSession, ANanLossStopsWithAMessageAndKeepsTheLastGoodWeights) {
  const std::string dir = test::temp_dir("session_nan");
  TrainingSession s;
  SessionOptions o;
  o.train = tiny(write_corpus(dir), 200);
  o.train.lr = 1e30f;
  o.train.warmup = 0;
  o.train.clip = 0;
  const auto st = run_to_end(s, o);
  ASSERT_EQ(st->state, SessionState::Failed);
  EXPECT_NE(st->message.find("the training loss became"), std::string::npos) << st->message;
  EXPECT_NE(st->message.find("last good snapshot"), std::string::npos) << st->message;
  EXPECT_LT(st->step, 200);
  ASSERT_TRUE(st->model);
  // The weights of the failing step are not kept: the newest snapshot before it stays.
  EXPECT_LT(st->model_step, st->step);
  ASSERT_FALSE(st->snapshot_steps.empty());
  EXPECT_EQ(st->snapshot_steps.back(), st->model_step);
  EXPECT_EQ(s.snapshot(st->model_step), st->model);
  // The last good weights give a finite loss in the engine.
  Engine e(st->model, make_cpu_backend());
  const Trace& tr = e.run_text("a cat");
  for (float v : tr.logits.data) ASSERT_TRUE(std::isfinite(v));
  for (float v : st->train_loss) EXPECT_TRUE(std::isfinite(v));
}

// start() with `o` must throw an Error whose message holds `says`, leave the finished run
// before it as it was, and not start anything.
void expect_bad(TrainingSession& s, const TrainOptions& t, const std::string& says) {
  const auto before = s.status();
  SessionOptions o;
  o.train = t;
  try {
    s.start(o);
    ADD_FAILURE() << "no error; expected: " << says;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.status(), before);
  EXPECT_EQ(s.status()->state, SessionState::Finished);
  EXPECT_TRUE(s.status()->model);
}

TEST(TrainingSession, BadInputIsAClearErrorAndThePreviousRunStays) {
  const std::string dir = test::temp_dir("session_bad");
  const std::string corpus = write_corpus(dir);
  TrainingSession s;
  SessionOptions good;
  good.train = tiny(corpus, 5);
  run_to_end(s, good);
  TrainOptions t = good.train;
  t.corpus = dir + "/missing.txt";
  expect_bad(s, t, "cannot read corpus");
  test::write_bytes(dir + "/empty.txt", "");
  t.corpus = dir + "/empty.txt";
  expect_bad(s, t, "is empty");
  test::write_bytes(dir + "/latin1.txt", std::string(200, 'a') + "caf\xe9" + std::string(200, 'b'));
  t.corpus = dir + "/latin1.txt";
  expect_bad(s, t, "latin1.txt");
  t.corpus = "builtin:nothing";
  expect_bad(s, t, "unknown corpus");
  // One field changed from the good run's options, and what the error must say.
  const std::vector<std::pair<std::function<void(TrainOptions&)>, std::string>> shapes = {
      {[](TrainOptions& o) { o.max_vocab = 5; }, "more than the 5 the vocabulary allows"},
      {[](TrainOptions& o) { o.embd = 18; }, "multiple of --heads"},
      {[](TrainOptions& o) { o.kv_heads = 3; }, "multiple of --kv-heads"},
      {[](TrainOptions& o) { o.block_size = 4000; }, "too short for block_size"},
  };
  for (const auto& [change, says] : shapes) {
    t = good.train;
    change(t);
    expect_bad(s, t, says);
  }
}

TEST(TrainingSession, StopKeepsTheRunAndResetForgetsIt) {
  const std::string dir = test::temp_dir("session_stop");
  TrainingSession s;
  SessionOptions o;
  o.train = tiny(write_corpus(dir), 1000);
  s.pause_at(12);
  s.start(o);
  ASSERT_TRUE(s.wait_idle(60000));
  s.stop();
  auto st = s.status();
  EXPECT_EQ(st->state, SessionState::Stopped);
  EXPECT_EQ(st->step, 12);
  ASSERT_TRUE(st->model);
  s.save(dir + "/stopped");
  EXPECT_EQ(load_model(dir + "/stopped")->config.n_layer, 2);
  s.reset();
  st = s.status();
  EXPECT_EQ(st->state, SessionState::Idle);
  EXPECT_FALSE(st->model);
  EXPECT_TRUE(st->train_loss.empty());
  EXPECT_THROW(s.save(dir + "/nothing"), Error);
}

TEST(TrainingSession, RepeatsCorpusLinesAreWrittenTwice) {
  const std::string text = repeats_corpus_text(2000, 3);
  EXPECT_GE(text.size(), 2000u);
  EXPECT_EQ(text, repeats_corpus_text(2000, 3));
  size_t lines = 0, begin = 0;
  for (size_t nl = text.find('\n'); nl != std::string::npos; begin = nl + 1, nl = text.find('\n', begin)) {
    // "S. S." with the same sentence S twice
    const std::string line = text.substr(begin, nl - begin);
    ASSERT_EQ(line.size() % 2, 1u) << line;
    const std::string sentence = line.substr(0, (line.size() - 3) / 2);
    EXPECT_EQ(line, sentence + ". " + sentence + ".");
    EXPECT_GE(std::count(sentence.begin(), sentence.end(), ' '), 3) << line;  // at least four words
    ++lines;
  }
  EXPECT_GT(lines, 20u);
  const Corpus c = load_corpus("builtin:repeats", 0.1f);
  EXPECT_EQ(c.vocab.size(), 27u);  // newline, space, '.', the 24 letters of the words (no j, x)
}

}  // namespace
}  // namespace attnviz
