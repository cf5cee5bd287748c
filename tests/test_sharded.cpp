// Sharded checkpoints: a random model's model.safetensors split into shards with a
// model.safetensors.index.json, as Hugging Face writes them, must load to exactly the
// same model and trace; and every broken index or shard set must be refused naming the
// file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/engine/engine.h"
#include "core/model/safetensors.h"
#include "test_util.h"

namespace attnviz {
namespace {
using namespace test;
namespace fs = std::filesystem;

// Splits DIR/model.safetensors into `n` shards (tensors dealt out in turn) and writes the
// index; `edit` may change the weight map before it is written. Removes model.safetensors.
std::string shard(const std::string& src, const std::string& tag, int n,
                  const std::function<void(nlohmann::json&)>& edit = {}) {
  const std::string dir = temp_dir(tag);
  for (const char* f : {"config.json", "tokenizer.json"}) fs::copy_file(src + "/" + f, dir + "/" + f);
  const auto whole = SafetensorsFile::open(src + "/model.safetensors");
  std::vector<SafetensorsWriter> w(static_cast<size_t>(n));
  std::vector<std::vector<float>> keep;  // values stay alive until the writes
  nlohmann::json map = nlohmann::json::object();
  size_t i = 0;
  for (const TensorInfo& t : whole.tensors()) {
    const size_t s = i++ % static_cast<size_t>(n);
    keep.push_back(whole.read_f32(t));
    w[s].add_f32(t.name, t.shape, keep.back().data());
    map[t.name] = "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(n) + ".safetensors";
  }
  for (int s = 0; s < n; ++s)
    w[static_cast<size_t>(s)].write(dir + "/model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(n) + ".safetensors");
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", map}};
  if (edit) edit(index);
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump(1);
  return dir;
}

TEST(Sharded, LoadsTheSameModelAsOneFile) {
  for (const char* arch : {"gpt2", "llama"}) {
    const std::string one = make_model_dir(small_config(arch, 2, 32, 4, arch[0] == 'l' ? 2 : 4, 50, 32), 5, "one");
    const std::string three = shard(one, "three", 3);
    ASSERT_FALSE(fs::exists(three + "/model.safetensors"));
    const auto a = load_model(one), b = load_model(three);
    const auto ids = random_ids(20, 50, 3);
    Engine ea(a, make_cpu_backend()), eb(b, make_cpu_backend());
    EXPECT_EQ(compare_traces(eb.run(ids), ea.run(ids), 0.0), "") << arch;
    EXPECT_TRUE(SafetensorsSet::open_dir(three).sharded());
    EXPECT_FALSE(SafetensorsSet::open_dir(one).sharded());
  }
}

TEST(Sharded, BrokenSetsAreRefusedNamingTheFile) {
  const std::string one = make_model_dir(small_config("llama", 1, 32, 4, 2, 50, 32), 6, "one_bad");
  struct Case {
    const char* what;
    std::function<void(const std::string& dir)> breakit;
    std::function<void(nlohmann::json&)> edit;
    const char* message;
  };
  const Case cases[] = {
      {"missing shard", [](const std::string& d) { fs::remove(d + "/model-00002-of-00003.safetensors"); }, {},
       "names shard 'model-00002-of-00003.safetensors', which is not in"},
      {"tensor in two shards",
       [&](const std::string& d) {  // shard 3 becomes a copy of shard 1
         fs::copy_file(d + "/model-00001-of-00003.safetensors", d + "/model-00003-of-00003.safetensors",
                       fs::copy_options::overwrite_existing);
       },
       {}, "is in two shards, 'model-00001-of-00003.safetensors' and 'model-00003-of-00003.safetensors'"},
      {"index places a tensor in the wrong shard", {},
       [](nlohmann::json& j) { j["weight_map"]["model.norm.weight"] = "model-00001-of-00003.safetensors"; },
       "places tensor 'model.norm.weight' in 'model-00001-of-00003.safetensors', but it is in"},
      {"index names a tensor no shard holds", {},
       [](nlohmann::json& j) { j["weight_map"]["lm_head.extra"] = "model-00001-of-00003.safetensors"; },
       "but no shard holds it"},
      {"shard outside the directory", {},
       [](nlohmann::json& j) { j["weight_map"]["model.norm.weight"] = "../model.safetensors"; },
       "is not a plain file name in the model directory"},
      {"no weight_map", {}, [](nlohmann::json& j) { j.erase("weight_map"); }, "no \"weight_map\" object"},
      {"weight_map value not a string", {}, [](nlohmann::json& j) { j["weight_map"]["model.norm.weight"] = 3; },
       "must be a file name"},
  };
  for (const Case& c : cases) {
    const std::string dir = shard(one, "bad", 3, c.edit);
    if (c.breakit) c.breakit(dir);
    const std::string e = load_error(dir);
    EXPECT_NE(e.find(c.message), std::string::npos) << c.what << ": " << e;
  }
  const std::string dir = shard(one, "badjson", 2);
  write_bytes(dir + "/model.safetensors.index.json", "{\"weight_map\": ");
  EXPECT_NE(load_error(dir).find("not valid JSON"), std::string::npos);
}

}  // namespace
}  // namespace attnviz
