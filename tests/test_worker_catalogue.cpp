// The bad-input catalogue (tests/bad_inputs/cases.json) through the GUI's worker: every
// case that names a model input (config.json, weights, shard index, GGUF, tokenizer.json,
// tokenizer.model, a missing folder, a builtin: name) is opened by the worker while a good
// model is loaded. The worker must publish the catalogue's message, keep the previous model
// and its trace, and still run that model's next forward pass.
//
// The cases are not listed here: run_cases.py --worker-manifest makes each one's files and
// says what to open (it chooses the cases with names_model_input), so a case added to the
// catalogue is covered here too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "core/model/random_model.h"
#include "tests/test_util.h"
#include "ui/state/worker.h"

namespace attnviz::ui {
namespace {

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Makes the files of every model-input case under `workdir`; returns the manifest.
nlohmann::json make_catalogue(const std::string& workdir) {
  const std::string manifest = workdir + "/worker_cases.json";
  // The CLI only writes the cases' files: $ATTNVIZ_CATALOGUE_CLI when set (.ci/run's
  // ThreadSanitizer stage passes the Release build's rather than building one under TSan).
  const char* env_cli = std::getenv("ATTNVIZ_CATALOGUE_CLI");
  const std::string cli = env_cli && *env_cli ? env_cli : ATTNVIZ_CLI_PATH;
  const std::string cmd = "/usr/bin/python3 " + quoted(ATTNVIZ_BAD_INPUTS_DIR "/run_cases.py") + " --cli " +
                          quoted(cli) + " --workdir " + quoted(workdir + "/cases") +
                          " --worker-manifest " + quoted(manifest) + " > " + quoted(workdir + "/setup.log") + " 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd << "\n" << test::read_file(workdir + "/setup.log");
  return rc == 0 ? test::read_json(manifest) : nlohmann::json::array();
}

TEST(UiWorkerCatalogue, EveryModelInputCaseKeepsThePreviousModel) {
  const nlohmann::json cases = make_catalogue(test::temp_dir("catalogue"));
  // The catalogue holds well over a hundred model-input cases; far fewer means the
  // selection or the manifest broke, not that the worker passed.
  ASSERT_GE(cases.size(), 150u);

  ModelConfig c = preset_config("tiny");
  c.n_layer = 2;
  Request good;
  good.model_spec = test::make_model_dir(c, 5, "catalogue-good");
  good.text = "hello";
  Worker w;
  ASSERT_TRUE(w.wait_for(w.post(good), 60000));
  auto s = w.latest();
  ASSERT_TRUE(s->error.empty()) << s->error;
  ASSERT_TRUE(s->model && s->trace);
  auto model = s->model;  // the good model the worker holds

  int n = 0;
  for (const auto& k : cases) {
    const std::string name = k.at("name");
    const std::string message = k.at("message");
    const auto trace = s->trace;
    for (const auto& [key, value] : k.at("env").items()) setenv(key.c_str(), value.get<std::string>().c_str(), 1);
    Request bad = good;
    bad.model_spec = k.at("model");
    if (!k.at("text").get<std::string>().empty()) bad.text = k.at("text");
    const bool answered = w.wait_for(w.post(bad), 60000);
    for (const auto& [key, value] : k.at("env").items()) unsetenv(key.c_str());
    ASSERT_TRUE(answered) << name << ": the worker did not answer";
    s = w.latest();
    EXPECT_FALSE(s->error.empty()) << name << ": no error shown";
    EXPECT_NE(s->error.find(message), std::string::npos)
        << name << ": the error lacks \"" << message << "\": " << s->error.substr(0, 400);
    EXPECT_TRUE(s->model == model) << name << ": the previous model must stay";
    EXPECT_TRUE(s->trace == trace) << name << ": the previous trace must stay";

    // The previous model still runs: a different text gives a new trace of its length.
    good.text = ++n % 2 ? "hello!" : "hello";
    ASSERT_TRUE(w.wait_for(w.post(good), 60000)) << name;
    s = w.latest();
    EXPECT_TRUE(s->error.empty()) << name << ": the good model after it: " << s->error;
    ASSERT_TRUE(s->model && s->trace) << name;
    model = s->model;  // reloaded only when the case wrongly replaced it (a failure above)
    EXPECT_TRUE(s->trace != trace) << name << ": no new forward pass";
    EXPECT_EQ(s->trace->T(), static_cast<int>(good.text.size())) << name;
  }
}

}  // namespace
}  // namespace attnviz::ui
