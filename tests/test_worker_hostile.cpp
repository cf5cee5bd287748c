// The GUI's worker survives hostile model inputs: opening a broken model directory
// publishes the error (the status bar shows it), keeps the previous model and its last
// trace, and the next good request runs normally.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <array>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/model/random_model.h"
#include "tests/test_util.h"
#include "ui/worker.h"

namespace attnviz::ui {
namespace {

namespace fs = std::filesystem;

std::string broken_model(const std::string& tag, const std::function<void(const std::string& dir)>& damage) {
  ModelConfig c = preset_config("tiny");
  c.n_layer = 1;
  const std::string dir = test::make_model_dir(c, 9, "worker-bad-" + tag);
  damage(dir);
  return dir;
}

// A tiny model directory whose tokenizer.json is a BPE file with `extra` members.
std::string model_with_tokenizer(const std::string& tag, const std::string& extra) {
  return broken_model(tag, [&](const std::string& d) {
    test::write_bytes(d + "/tokenizer.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"h\":0,\"i\":1},\"merges\":[]}" + extra + "}");
  });
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(test::read_file(dir + "/config.json"));
  edit(j);
  test::write_bytes(dir + "/config.json", j.dump());
}

TEST(UiWorkerHostile, BrokenModelsKeepThePreviousModelAndShowTheError) {
  ModelConfig c = preset_config("tiny");
  c.n_layer = 2;
  const std::string good = test::make_model_dir(c, 5, "worker-good");
  struct Bad {
    std::string name, message;
    std::string dir;        // the model opened
    std::string text = "";  // the text typed ("" keeps "hello")
  };
  std::vector<Bad> bad = {
      {"missing_config", "not found", broken_model("nocfg", [](auto& d) { fs::remove(d + "/config.json"); })},
      {"fifo_config", "not a regular file", broken_model("fifo", [](auto& d) {
         fs::remove(d + "/config.json");
         mkfifo((d + "/config.json").c_str(), 0600);
       })},
      {"nul_junk", "NUL byte", broken_model("nul", [](auto& d) {
         test::write_bytes(d + "/config.json", test::read_file(d + "/config.json") + std::string("\0junk", 5));
       })},
      {"deep_value", "must be a positive integer", broken_model("deep", [](auto& d) {
         std::string s = test::read_file(d + "/config.json");
         const std::string key = "\"vocab_size\": 96";
         s.replace(s.find(key), key.size(), "\"vocab_size\":" + std::string(200000, '[') + std::string(200000, ']'));
         test::write_bytes(d + "/config.json", s);
       })},
      {"heads_2pow32", "largest dimension", broken_model("heads", [](auto& d) {
         edit_config(d, [](auto& j) { j["num_attention_heads"] = 1ULL << 32; });
       })},
      {"huge_model", "needs about", broken_model("huge", [](auto& d) {
         edit_config(d, [](auto& j) {
           j["vocab_size"] = 1 << 24, j["hidden_size"] = 1 << 20, j["num_attention_heads"] = 1 << 10,
           j["num_key_value_heads"] = 1 << 10, j.erase("head_dim");
         });
       })},
      {"negative_rope_theta", "rope_theta", broken_model("rope", [](auto& d) {
         edit_config(d, [](auto& j) { j["rope_theta"] = -1.0; });
       })},
      {"fifo_weights", "not a regular file", broken_model("fifow", [](auto& d) {
         fs::remove(d + "/model.safetensors");
         mkfifo((d + "/model.safetensors").c_str(), 0600);
       })},
      {"truncated_weights", "truncated", broken_model("trunc", [](auto& d) {
         fs::resize_file(d + "/model.safetensors", fs::file_size(d + "/model.safetensors") - 100);
       })},
      {"fifo_tokenizer", "not a regular file", broken_model("fifot", [](auto& d) {
         fs::remove(d + "/tokenizer.json");
         mkfifo((d + "/tokenizer.json").c_str(), 0600);
       })},
      {"missing_dir", "does not exist", "/no/such/model/dir"},
      {"builtin_escape", "not a built-in model name", "builtin:../.."},
      // hostile tokenizer files (test_hostile_tokenizer.cpp has each class)
      {"deep_sequence", "nested more than",
       model_with_tokenizer("deepseq", ",\"decoder\":" + repeat("{\"type\":\"Sequence\",\"decoders\":[", 50000) +
                                           "{\"type\":\"Fuse\"}" + repeat("]}", 50000))},
      {"deep_tokenizer_value", "expected an object",
       model_with_tokenizer("deepval", ",\"normalizer\":" + std::string(100000, '[') + std::string(100000, ']'))},
      {"added_id_2pow40", "added_tokens[0].id is 1099511627776",
       model_with_tokenizer("id40", ",\"added_tokens\":[{\"id\":1099511627776,\"content\":\"<s>\",\"special\":true}]")},
      {"metaspace_empty", "must be one character",
       model_with_tokenizer("meta", ",\"decoder\":{\"type\":\"Metaspace\",\"replacement\":\"\"}")},
      {"strip_huge", "\"stop\" must be a whole number",
       model_with_tokenizer("strip", ",\"decoder\":{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":4294967296}")},
  };
  // Text that is not strict UTF-8, typed into the good model.
  for (const auto& [name, message, text] : std::vector<std::array<std::string, 3>>{
           {"surrogate_text", "UTF-16 surrogate", "hel\xED\xA0\x80lo"},
           {"overlong_text", "overlong", "hel\xC0\xAFlo"},
           {"above_10ffff_text", "above U+10FFFF", "hel\xF4\x90\x80\x80lo"}})
    bad.push_back({name, message, good, text});

  Worker w;
  Request r;
  r.model_spec = good;
  r.text = "hello";
  ASSERT_TRUE(w.wait_for(w.post(r), 60000));
  auto s = w.latest();
  ASSERT_TRUE(s->error.empty()) << s->error;
  ASSERT_TRUE(s->model && s->trace);
  const auto model = s->model;
  const auto trace = s->trace;

  for (const Bad& b : bad) {
    Request br = r;
    br.model_spec = b.dir;
    if (!b.text.empty()) br.text = b.text;
    ASSERT_TRUE(w.wait_for(w.post(br), 60000)) << b.name << ": the worker did not answer";
    s = w.latest();
    EXPECT_NE(s->error.find(b.message), std::string::npos) << b.name << ": " << s->error.substr(0, 300);
    EXPECT_EQ(s->model, model) << b.name << ": the previous model must stay";
    EXPECT_EQ(s->trace, trace) << b.name << ": the previous trace must stay";
  }
  // And the good model still runs.
  r.text = "hello!";
  ASSERT_TRUE(w.wait_for(w.post(r), 60000));
  s = w.latest();
  EXPECT_TRUE(s->error.empty()) << s->error;
  EXPECT_EQ(s->trace->T(), 6);
}

}  // namespace
}  // namespace attnviz::ui
