// The GUI's model opening without ImGui: load_model's progress hook (which the loader
// cancels through), the ModelLoader thread (result, error, cancel, replacement), the model
// browser's listing helpers (filter, names, folders, details) and the recent-models list
// with its settings round trip. Test names start with "Ui": CI runs them under ThreadSanitizer.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/model/gguf.h"
#include "core/model/gguf_writer.h"
#include "core/model/model.h"
#include "core/model/random_model.h"
#include "test_util.h"
#include "ui/state/app_state.h"
#include "ui/jobs/model_loader.h"
#include "ui/state/settings.h"
#include "ui/jobs/store_listing.h"

using namespace attnviz;
using namespace attnviz::ui;
namespace fs = std::filesystem;

namespace {

// The bytes of a safetensors file's tensor data, from the file itself: its size less the
// 8-byte header length and the header (the format's definition).
uint64_t safetensors_data_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char n[8] = {};
  in.read(reinterpret_cast<char*>(n), 8);
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | n[i];
  return fs::file_size(path) - 8 - header;
}

// Waits up to 60 s for the loader's result.
std::optional<ModelLoader::Result> wait_result(ModelLoader& loader) {
  for (int i = 0; i < 6000; ++i) {
    if (auto r = loader.take()) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

}  // namespace

TEST(UiModelLoader, ProgressCountsEveryTensorByteOnce) {
  const ModelConfig c = preset_config("tiny");
  const std::string dir = test::make_model_dir(c, 3, "progress");
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  LoadOptions opt;
  opt.progress = [&](uint64_t done, uint64_t total) { calls.emplace_back(done, total); };
  const auto m = load_model(dir, opt);
  ASSERT_FALSE(calls.empty());
  const uint64_t total = safetensors_data_bytes(dir + "/model.safetensors");
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].second, total);
    if (i) {
      EXPECT_GT(calls[i].first, calls[i - 1].first) << "call " << i;
    }
  }
  EXPECT_EQ(calls.back().first, total);  // every tensor of this model is used
  // The same in a GGUF file: the tensor bytes the file lists.
  const std::string gguf = write_random_gguf(c, 3, test::temp_dir("progress-gguf"), GgmlType::Q8_0);
  uint64_t listed = 0;
  const GgufFile file = GgufFile::open(gguf);  // kept: tensors() refers into it
  for (const auto& t : file.tensors()) listed += t.nbytes;
  calls.clear();
  load_model(gguf, opt);
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back().first, listed);
  EXPECT_EQ(calls.back().second, listed);
}

TEST(UiModelLoader, AThrowingProgressStopsTheLoad) {
  const std::string dir = test::make_model_dir(preset_config("tiny"), 4, "stop");
  int calls = 0;
  LoadOptions opt;
  opt.progress = [&](uint64_t, uint64_t) {
    if (++calls == 2) throw std::runtime_error("stop here");
  };
  EXPECT_THROW(load_model(dir, opt), std::runtime_error);
  EXPECT_EQ(calls, 2);  // nothing read after the throw
}

TEST(UiModelLoader, LoadsOffTheCallingThread) {
  const ModelConfig c = preset_config("tiny");
  const std::string dir = test::make_model_dir(c, 5, "loader");
  ModelLoader loader;
  EXPECT_FALSE(loader.take());
  loader.start(dir);
  const auto r = wait_result(loader);
  ASSERT_TRUE(r);
  ASSERT_TRUE(r->model) << r->error;
  EXPECT_EQ(r->spec, dir);
  EXPECT_EQ(r->model->config.n_layer, c.n_layer);
  EXPECT_TRUE(r->error.empty());
  EXPECT_GE(r->ms, 0.0);
  EXPECT_FALSE(loader.take());  // once
  EXPECT_FALSE(loader.busy());
}

TEST(UiModelLoader, AFailedLoadGivesItsError) {
  ModelLoader loader;
  const std::string missing = test::temp_dir("missing") + "/no-such-model";
  loader.start(missing);
  const auto r = wait_result(loader);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->model);
  EXPECT_NE(r->error.find("no-such-model"), std::string::npos) << r->error;
}

TEST(UiModelLoader, CancelGivesNoResultAndANewStartReplacesTheOld) {
  const std::string a = test::make_model_dir(preset_config("tiny"), 6, "cancel-a");
  const std::string b = test::make_model_dir(preset_config("tiny"), 7, "cancel-b");
  {
    ModelLoader loader;
    loader.start(a);
    loader.cancel();
    EXPECT_FALSE(loader.busy());
    // Whether the thread stopped at a tensor or had finished, no result ever comes.
    for (int i = 0; i < 50; ++i) {
      EXPECT_FALSE(loader.take());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ModelLoader loader;
  loader.start(a);
  loader.start(b);  // a is cancelled
  const auto r = wait_result(loader);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->spec, b);
  ASSERT_TRUE(r->model) << r->error;
  EXPECT_EQ(r->model->dir, b);
  EXPECT_FALSE(loader.take());
}

TEST(UiModelLoader, DestroyedWhileLoadingJoinsItsThreads) {
  const std::string a = test::make_model_dir(preset_config("tiny"), 8, "destroy");
  for (int i = 0; i < 3; ++i) {
    ModelLoader loader;
    loader.start(a);
    loader.start(a);
  }  // ~ModelLoader cancels and joins (TSan and ASan see the threads end)
  SUCCEED();
}

TEST(UiStoreListing, FilterMatchesEveryWordWithoutCase) {
  StoredModel m;
  m.source = "ollama";
  m.name = "gemma3:4b";
  m.architecture = "gemma3";
  m.file_type = "Q4_K_M";
  m.path = "/home/u/.ollama/models/blobs/sha256-abc";
  EXPECT_TRUE(store_entry_matches(m, ""));
  EXPECT_TRUE(store_entry_matches(m, "GEMMA"));
  EXPECT_TRUE(store_entry_matches(m, "q4_k ollama"));
  EXPECT_TRUE(store_entry_matches(m, "  sha256  "));
  EXPECT_FALSE(store_entry_matches(m, "gemma qwen"));
  EXPECT_FALSE(store_entry_matches(m, "hf"));
}

TEST(UiStoreListing, EntriesOpenByTheirStoreNames) {
  StoredModel m;
  m.path = "/p/blob";
  m.source = "ollama", m.name = "gemma3:4b";
  EXPECT_EQ(store_entry_spec(m), "ollama:gemma3:4b");
  m.source = "hf", m.name = "Qwen/Qwen3-0.6B";
  EXPECT_EQ(store_entry_spec(m), "hf:Qwen/Qwen3-0.6B");
  m.name = "TheBloke/X-GGUF/x.Q4_K_M.gguf";  // a snapshot's GGUF file: no hf: name reaches it
  EXPECT_EQ(store_entry_spec(m), "/p/blob");
  m.source = "lmstudio", m.name = "pub/repo/f.gguf";
  EXPECT_EQ(store_entry_spec(m), "/p/blob");
}

TEST(UiStoreListing, FolderListingAndOpenablePaths) {
  const std::string d = test::temp_dir("folder");
  fs::create_directories(d + "/b-model");
  std::ofstream(d + "/b-model/config.json") << "{}";
  fs::create_directories(d + "/a-plain");
  fs::create_directories(d + "/.hidden");
  std::ofstream(d + "/z.gguf") << "GGUF1234";
  std::ofstream(d + "/c.GGUF") << "GGUF";
  std::ofstream(d + "/notes.txt") << "x";
  std::string error = "stale";
  const auto entries = list_folder(d, &error);
  EXPECT_TRUE(error.empty());
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].name, "a-plain");
  EXPECT_TRUE(entries[0].dir);
  EXPECT_FALSE(entries[0].model_dir);
  EXPECT_EQ(entries[1].name, "b-model");
  EXPECT_TRUE(entries[1].model_dir);
  EXPECT_EQ(entries[2].name, "c.GGUF");
  EXPECT_EQ(entries[3].name, "z.gguf");
  EXPECT_EQ(entries[3].bytes, 8u);
  EXPECT_TRUE(list_folder(d + "/nope", &error).empty());
  EXPECT_NE(error.find("nope"), std::string::npos);

  std::string why;
  EXPECT_TRUE(openable_path(d + "/b-model", &why));
  EXPECT_TRUE(openable_path(d + "/z.gguf", &why));
  EXPECT_FALSE(openable_path(d + "/a-plain", &why));
  EXPECT_NE(why.find("config.json"), std::string::npos) << why;
  EXPECT_FALSE(openable_path(d + "/notes.txt", &why));
  EXPECT_NE(why.find("not a .gguf file"), std::string::npos) << why;
  EXPECT_FALSE(openable_path(d + "/gone.gguf", &why));
  EXPECT_NE(why.find("does not exist"), std::string::npos) << why;
}

TEST(UiStoreListing, DetailsSayWhatTheGqaPanelWould) {
  // Qwen2.5-0.5B's released shape (its model card: 24 layers, 14 query heads, 2 KV heads,
  // 0.49B parameters; 896 / 14 = 64 per head; 32768 context).
  const std::string dir = test::temp_dir("details");
  ModelConfig c = preset_config("qwen2.5-0.5b");
  std::ofstream(dir + "/config.json") << config_to_json(c).dump();
  const ModelDetails d = model_details(dir);
  EXPECT_TRUE(d.error.empty()) << d.error;
  EXPECT_EQ(d.shape, "24 layers \xC2\xB7 14 query heads \xC2\xB7 2 KV heads (7 queries each) \xC2\xB7 head size 64 \xC2\xB7 context 32768");
  EXPECT_EQ(d.params, "494,032,768 parameters");
  // A GGUF file's metadata gives the same, without reading a weight.
  const ModelConfig tiny = preset_config("tiny");
  const std::string gguf = write_random_gguf(tiny, 1, test::temp_dir("details-gguf"), GgmlType::F32);
  const ModelDetails g = model_details(gguf);
  EXPECT_TRUE(g.error.empty()) << g.error;
  EXPECT_EQ(g.shape, describe_config(tiny).shape);
  const ModelDetails bad = model_details(dir + "/missing");
  EXPECT_FALSE(bad.error.empty());
}

TEST(UiState, RecentModelsNewestFirstOnceAndKept) {
  std::vector<std::string> r;
  remember_model(r, "a");
  remember_model(r, "b");
  remember_model(r, "a");
  EXPECT_EQ(r, (std::vector<std::string>{"a", "b"}));
  remember_model(r, "");
  EXPECT_EQ(r.size(), 2u);
  for (int i = 0; i < 15; ++i) remember_model(r, "m" + std::to_string(i));
  ASSERT_EQ(r.size(), kMaxRecentModels);
  EXPECT_EQ(r.front(), "m14");
  EXPECT_EQ(r.back(), "m5");
  // Through the settings file: the order kept, duplicates and non-strings dropped.
  AppState s, t;
  s.recent_models = {"ollama:gemma3:4b", "/x/model.gguf", "hf:Qwen/Qwen3-0.6B"};
  PanelVisibility vis;
  ASSERT_TRUE(settings_from_json(settings_to_json(s, vis), t, vis));
  EXPECT_EQ(t.recent_models, s.recent_models);
  AppState u;
  ASSERT_TRUE(settings_from_json(R"({"recent_models": ["a", 3, "b", "a", null]})", u, vis));
  EXPECT_EQ(u.recent_models, (std::vector<std::string>{"a", "b"}));
}
