// The GUI's worker survives hostile text: text that is not strict UTF-8, typed into a good
// model, publishes the error (the status bar shows it), keeps the model and its last trace,
// and the next good request runs normally. Broken model inputs are the bad-input
// catalogue's, opened through the worker in test_worker_catalogue.cpp.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "core/model/random_model.h"
#include "tests/test_util.h"
#include "ui/state/worker.h"

namespace attnviz::ui {
namespace {

TEST(UiWorkerHostile, TextThatIsNotUtf8KeepsTheModelAndShowsTheError) {
  ModelConfig c = preset_config("tiny");
  c.n_layer = 2;
  Worker w;
  Request r;
  r.model_spec = test::make_model_dir(c, 5, "worker-good");
  r.text = "hello";
  ASSERT_TRUE(w.wait_for(w.post(r), 60000));
  auto s = w.latest();
  ASSERT_TRUE(s->error.empty()) << s->error;
  ASSERT_TRUE(s->model && s->trace);
  const auto model = s->model;
  const auto trace = s->trace;

  for (const auto& [name, message, text] : std::vector<std::array<std::string, 3>>{
           {"surrogate_text", "UTF-16 surrogate", "hel\xED\xA0\x80lo"},
           {"overlong_text", "overlong", "hel\xC0\xAFlo"},
           {"above_10ffff_text", "above U+10FFFF", "hel\xF4\x90\x80\x80lo"}}) {
    Request br = r;
    br.text = text;
    ASSERT_TRUE(w.wait_for(w.post(br), 60000)) << name << ": the worker did not answer";
    s = w.latest();
    EXPECT_NE(s->error.find(message), std::string::npos) << name << ": " << s->error.substr(0, 300);
    EXPECT_EQ(s->model, model) << name << ": the model must stay";
    EXPECT_EQ(s->trace, trace) << name << ": the previous trace must stay";
  }
  // And the model still runs.
  r.text = "hello!";
  ASSERT_TRUE(w.wait_for(w.post(r), 60000));
  s = w.latest();
  EXPECT_TRUE(s->error.empty()) << s->error;
  EXPECT_EQ(s->trace->T(), 6);
}

}  // namespace
}  // namespace attnviz::ui
