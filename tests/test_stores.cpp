// The model stores (core/model/stores.h) on fake stores built in a temporary HOME: an Ollama
// store (a manifest with model, template, params and projector layers; a real GGUF blob), a
// Hugging Face cache (files symlinked into blobs/, two revisions), an LM Studio tree (a model
// and its mmproj) and llama.cpp's cache. Checks `models --json`, the ollama:/hf: names (they
// resolve and load), each refusal reason, and the bad inputs: a manifest that is not JSON, a
// missing blob, a blob that is not GGUF, a symlink loop, an unknown tag, an unreadable store.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/gguf.h"
#include "core/model/gguf_writer.h"
#include "core/model/model.h"
#include "core/model/paths.h"
#include "core/model/stores.h"
#include "tests/cli_run.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

namespace fs = std::filesystem;

const std::string kHexA = std::string(64, 'a');  // the model blob's digest
const std::string kHexB = std::string(64, 'b');  // template, params, projector
const std::string kCommitMain = "1111111111111111111111111111111111111111";
const std::string kCommitOld = "2222222222222222222222222222222222222222";

// The store variables set to a test's own folders for its lifetime, and restored after.
class StoreEnv {
 public:
  static constexpr const char* kVars[] = {"HOME",    "OLLAMA_MODELS",  "HF_HUB_CACHE",
                                          "HF_HOME", "XDG_CACHE_HOME", "LLAMA_CACHE"};
  explicit StoreEnv(const std::string& home) {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved_[v] = old;
      unsetenv(v);
    }
    setenv("HOME", home.c_str(), 1);
  }
  ~StoreEnv() {
    for (const char* v : kVars) {
      if (saved_.count(v))
        setenv(v, saved_[v].c_str(), 1);
      else
        unsetenv(v);
    }
  }

 private:
  std::map<std::string, std::string> saved_;
};

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  test::write_bytes(path, text);
}

// A GGUF file holding only metadata: general.architecture `arch` (none when empty),
// general.file_type `file_type` (none when < 0) and any clip.* key asked for.
void write_metadata_gguf(const std::string& path, const std::string& arch, int file_type, bool clip_key = false) {
  GgufWriter g;
  if (!arch.empty()) g.set_string("general.architecture", arch);
  if (file_type >= 0) g.set_u32("general.file_type", static_cast<uint32_t>(file_type));
  if (clip_key) g.set_bool("clip.has_vision_encoder", true);
  fs::create_directories(fs::path(path).parent_path());
  g.write(path);
}

std::string ollama_manifest(const std::string& model_digest) {
  auto l = [](const std::string& type, const std::string& digest) {
    return nlohmann::json{{"mediaType", "application/vnd.ollama.image." + type}, {"digest", digest}, {"size", 1}};
  };
  const nlohmann::json j = {
      {"schemaVersion", 2},
      {"mediaType", "application/vnd.docker.distribution.manifest.v2+json"},
      {"config", {{"mediaType", "application/vnd.docker.container.image.v1+json"}, {"digest", "sha256:" + kHexB}}},
      {"layers",
       {l("model", model_digest), l("projector", "sha256:" + kHexB), l("template", "sha256:" + kHexB),
        l("params", "sha256:" + kHexB)}}};
  return j.dump();
}

// The fake stores, built once for the suite under one temporary HOME.
class Stores : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    home_ = new std::string(test::temp_dir("stores-home"));
    const std::string h = *home_;
    const ModelConfig c = test::small_config("llama", 2, 32, 4, 2, 96, 16);
    // A real model as GGUF (with its tokenizer) and as a Hugging Face directory.
    const std::string gguf = write_random_gguf(c, 7, test::temp_dir("stores-gguf"), GgmlType::F32);
    const std::string hf = test::make_model_dir(c, 7, "stores-hf");

    // --- Ollama: library/tiny:latest and ns/tiny:v1 (real blob), broken manifests beside.
    const std::string o = h + "/.ollama/models";
    fs::create_directories(o + "/blobs");
    fs::copy_file(gguf, o + "/blobs/sha256-" + kHexA);
    write(o + "/blobs/sha256-" + kHexB, "{{ .Prompt }}");  // the template (and the others): not GGUF
    const std::string lib = o + "/manifests/registry.ollama.ai/library";
    write(lib + "/tiny/latest", ollama_manifest("sha256:" + kHexA));
    write(o + "/manifests/registry.ollama.ai/ns/tiny/v1", ollama_manifest("sha256:" + kHexA));
    write(o + "/manifests/example.com/team/tiny/v2", ollama_manifest("sha256:" + kHexA));
    write(lib + "/broken/latest", "this is not JSON");
    write(lib + "/noblob/latest", ollama_manifest("sha256:" + std::string(64, 'c')));
    write(lib + "/notgguf/latest", ollama_manifest("sha256:" + kHexB));

    // --- Hugging Face: org/tiny (refs/main → a model directory, refs/old → a lone .gguf),
    // every file a symlink into blobs/; org/loop (config.json a symlink loop); org/lfm (an
    // unsupported model_type); org/noweights (config.json only).
    const std::string hub = h + "/.cache/huggingface/hub";
    const std::string repo = hub + "/models--org--tiny";
    int blob = 0;
    auto link_in = [&](const std::string& snap, const std::string& file, const std::string& from) {
      const std::string name = "blob" + std::to_string(blob++);
      fs::create_directories(repo + "/blobs");
      fs::copy_file(from, repo + "/blobs/" + name);
      fs::create_directories(snap);
      fs::create_symlink("../../blobs/" + name, snap + "/" + file);
    };
    for (const auto& e : fs::directory_iterator(hf))
      link_in(repo + "/snapshots/" + kCommitMain, e.path().filename().string(), e.path().string());
    link_in(repo + "/snapshots/" + kCommitOld, "tiny-F32.gguf", gguf);
    write(repo + "/refs/main", kCommitMain + "\n");
    write(repo + "/refs/old", kCommitOld);
    const std::string loop = hub + "/models--org--loop/snapshots/" + kCommitMain;
    fs::create_directories(loop);
    fs::create_symlink("config.json", loop + "/config.json");
    write(hub + "/models--org--loop/refs/main", kCommitMain);
    const std::string lfm = hub + "/models--org--lfm/snapshots/" + kCommitMain;
    write(lfm + "/config.json", R"({"model_type": "lfm3", "torch_dtype": "bfloat16"})");
    write(lfm + "/model.safetensors", "");
    write(hub + "/models--org--lfm/refs/main", kCommitMain);
    const std::string now = hub + "/models--org--noweights/snapshots/" + kCommitMain;
    write(now + "/config.json", test::read_file(hf + "/config.json"));
    write(hub + "/models--org--noweights/refs/main", kCommitMain);

    // org/multi: a snapshot of .gguf files only, two of them (one entry each; a name must choose).
    const std::string multi = hub + "/models--org--multi/snapshots/" + kCommitMain;
    write_metadata_gguf(multi + "/multi-Q4_K_M.gguf", "llama", 15);
    write_metadata_gguf(multi + "/multi-Q8_0.gguf", "llama", 7);
    write(hub + "/models--org--multi/refs/main", kCommitMain);

    // --- LM Studio: a model and its vision projector; an unsupported architecture.
    const std::string lms = h + "/.lmstudio/models/pub/tiny-GGUF";
    fs::create_directories(lms);
    fs::copy_file(gguf, lms + "/tiny-F32.gguf");
    write_metadata_gguf(lms + "/mmproj-tiny-F16.gguf", "clip", 1);
    write_metadata_gguf(h + "/.cache/lm-studio/models/pub/old/bert-Q8_0.gguf", "bert", 7);
    // --- llama.cpp's cache: file types by llama.cpp's names; a projector without an architecture.
    write_metadata_gguf(h + "/.cache/llama.cpp/org_tiny_Q4_K_M.gguf", "llama", 15);
    write_metadata_gguf(h + "/.cache/llama.cpp/proj.gguf", "", 1, true);
    write_metadata_gguf(h + "/.cache/llama.cpp/odd.gguf", "qwen3", 99);
    gguf_ = new std::string(gguf);
  }
  static std::string* home_;
  static std::string* gguf_;
  StoreEnv env_{*home_};

  // `models --json`'s entries by source + " " + name.
  static std::map<std::string, nlohmann::json> listed() {
    const auto r = test::cli({"models", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    std::map<std::string, nlohmann::json> by;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    for (const auto& m : j.at("models"))
      by[m.at("source").get<std::string>() + " " + m.at("name").get<std::string>()] = m;
    return by;
  }
  static std::string resolve_error(const std::string& spec) {
    try {
      resolve_model_dir(spec);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};
std::string* Stores::home_ = nullptr;
std::string* Stores::gguf_ = nullptr;

TEST_F(Stores, ModelsJsonListsEveryStoreWithThePinnedFields) {
  const auto by = listed();
  const std::string h = *home_;
  ASSERT_TRUE(by.count("ollama tiny:latest")) << nlohmann::json(by).dump(1);
  const auto& t = by.at("ollama tiny:latest");
  for (const char* key : {"source", "name", "path", "architecture", "file_type", "bytes", "opens", "reason"})
    EXPECT_TRUE(t.contains(key)) << key;
  EXPECT_EQ(t["path"], h + "/.ollama/models/blobs/sha256-" + kHexA);
  EXPECT_EQ(t["architecture"], "llama");
  EXPECT_EQ(t["bytes"], fs::file_size(*gguf_));
  EXPECT_EQ(t["opens"], true);
  EXPECT_EQ(t["reason"], "");
  // Ollama's names: library/ left out; another namespace; another registry.
  EXPECT_TRUE(by.count("ollama ns/tiny:v1"));
  EXPECT_TRUE(by.count("ollama example.com/team/tiny:v2"));

  const auto& hf = by.at("hf org/tiny");
  EXPECT_EQ(hf["path"], h + "/.cache/huggingface/hub/models--org--tiny/snapshots/" + kCommitMain);
  EXPECT_EQ(hf["architecture"], "llama");
  EXPECT_EQ(hf["opens"], true) << hf["reason"];
  EXPECT_GT(hf["bytes"].get<uint64_t>(), 1000u);  // the symlinked model.safetensors, followed

  EXPECT_EQ(by.at("hf org/multi/multi-Q4_K_M.gguf")["file_type"], "Q4_K_M");
  EXPECT_EQ(by.at("hf org/multi/multi-Q8_0.gguf")["file_type"], "Q8_0");
  EXPECT_EQ(by.at("lmstudio pub/tiny-GGUF/tiny-F32.gguf")["opens"], true);
  const auto& proj = by.at("lmstudio pub/tiny-GGUF/mmproj-tiny-F16.gguf");
  EXPECT_EQ(proj["opens"], false);
  EXPECT_EQ(proj["reason"], "a vision projector only");
  EXPECT_EQ(proj["file_type"], "F16");
  EXPECT_EQ(by.at("lmstudio pub/old/bert-Q8_0.gguf")["reason"], "model type bert is not supported");
  EXPECT_EQ(by.at("lmstudio pub/old/bert-Q8_0.gguf")["file_type"], "Q8_0");

  EXPECT_EQ(by.at("llamacpp org_tiny_Q4_K_M.gguf")["file_type"], "Q4_K_M");
  EXPECT_EQ(by.at("llamacpp proj.gguf")["reason"], "a vision projector only");
  EXPECT_EQ(by.at("llamacpp odd.gguf")["file_type"], "type 99");
}

TEST_F(Stores, ModelsGivesEachRefusalItsReason) {
  const auto by = listed();
  auto reason = [&](const std::string& key) {
    EXPECT_TRUE(by.count(key)) << key;
    if (!by.count(key)) return std::string();
    EXPECT_EQ(by.at(key)["opens"], false) << key;
    return by.at(key)["reason"].get<std::string>();
  };
  EXPECT_NE(reason("ollama broken:latest").find("not valid JSON"), std::string::npos);
  EXPECT_NE(reason("ollama noblob:latest").find("is missing"), std::string::npos);
  EXPECT_NE(reason("ollama notgguf:latest").find("wrong magic"), std::string::npos);
  EXPECT_NE(reason("hf org/loop").find("symlink loop"), std::string::npos);
  EXPECT_NE(reason("hf org/lfm").find("unknown model_type \"lfm3\""), std::string::npos);
  EXPECT_EQ(by.at("hf org/lfm")["architecture"], "lfm3");
  EXPECT_EQ(by.at("hf org/lfm")["file_type"], "bfloat16");
  EXPECT_NE(reason("hf org/noweights").find("no model.safetensors"), std::string::npos);
}

TEST_F(Stores, TextTableListsTheModels) {
  const auto r = test::cli({"models"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("SOURCE"), std::string::npos);
  EXPECT_NE(r.out.find("tiny:latest"), std::string::npos);
  EXPECT_NE(r.out.find("no: a vision projector only"), std::string::npos);
}

TEST_F(Stores, NamesResolveAndLoad) {
  const std::string h = *home_;
  EXPECT_EQ(resolve_model_dir("ollama:tiny"), h + "/.ollama/models/blobs/sha256-" + kHexA);
  EXPECT_EQ(resolve_model_dir("ollama:tiny:latest"), resolve_model_dir("ollama:tiny"));
  EXPECT_EQ(resolve_model_dir("ollama:ns/tiny:v1"), resolve_model_dir("ollama:tiny"));
  EXPECT_EQ(resolve_model_dir("ollama:example.com/team/tiny:v2"), resolve_model_dir("ollama:tiny"));
  const std::string repo = h + "/.cache/huggingface/hub/models--org--tiny";
  EXPECT_EQ(resolve_model_dir("hf:org/tiny"), repo + "/snapshots/" + kCommitMain);
  EXPECT_EQ(resolve_model_dir("hf:org/tiny@main"), repo + "/snapshots/" + kCommitMain);
  EXPECT_EQ(resolve_model_dir("hf:org/tiny@old"), repo + "/snapshots/" + kCommitOld + "/tiny-F32.gguf");
  EXPECT_EQ(resolve_model_dir("hf:org/tiny@" + kCommitOld), repo + "/snapshots/" + kCommitOld + "/tiny-F32.gguf");

  // Each loads, and the two forms of the same weights predict alike.
  const auto a = load_model("ollama:tiny");
  const auto b = load_model("hf:org/tiny");
  const auto c = load_model("hf:org/tiny@old");
  EXPECT_EQ(a->format, "gguf");
  EXPECT_EQ(b->config.n_layer, 2);
  EXPECT_EQ(c->format, "gguf");
  EXPECT_EQ(a->name, "ollama:tiny");
  // Every --model takes them: info through the CLI, OLLAMA_MODELS choosing the store.
  setenv("OLLAMA_MODELS", (h + "/.ollama/models").c_str(), 1);
  const auto r = test::cli({"info", "--model", "ollama:tiny", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["dir"], h + "/.ollama/models/blobs/sha256-" + kHexA);
  const auto t = test::cli({"tokenize", "--model", "ollama:tiny", "--text", "hi", "--json"});
  EXPECT_EQ(t.code, 0) << t.err;
}

TEST_F(Stores, BadNamesAndBrokenStoresAreClearErrors) {
  auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  // An unknown tag names the tags there are; an unknown model the models there are.
  std::string e = resolve_error("ollama:tiny:7b");
  EXPECT_TRUE(has(e, "no tag '7b' of tiny") && has(e, "its tags: latest") && has(e, "HINT: attnviz-cli models")) << e;
  e = resolve_error("ollama:gemma3");
  EXPECT_TRUE(has(e, "no Ollama model 'gemma3:latest'") && has(e, "tiny:latest")) << e;
  EXPECT_TRUE(has(resolve_error("ollama:broken"), "not valid JSON")) << resolve_error("ollama:broken");
  EXPECT_TRUE(has(resolve_error("ollama:noblob"), "is missing")) << resolve_error("ollama:noblob");
  EXPECT_TRUE(has(resolve_error("ollama:notgguf"), "is not a GGUF file")) << resolve_error("ollama:notgguf");
  e = resolve_error("hf:org/tiny@v9");
  EXPECT_TRUE(has(e, "no revision 'v9'") && has(e, "refs: main, old") && has(e, kCommitOld)) << e;
  EXPECT_TRUE(has(resolve_error("hf:org/loop"), "symlink loop")) << resolve_error("hf:org/loop");
  e = resolve_error("hf:org/multi");
  EXPECT_TRUE(has(e, "several .gguf files (multi-Q4_K_M.gguf, multi-Q8_0.gguf)")) << e;
  e = resolve_error("hf:org/nothere");
  EXPECT_TRUE(has(e, "no Hugging Face model org/nothere") && has(e, "org/tiny")) << e;
  // Names that could step out of the store are refused as usage errors.
  for (const char* bad : {"ollama:../x", "ollama:a/b/c/d", "hf:org/../x", "hf:org/tiny@../../x", "ollama:"}) {
    try {
      resolve_model_dir(bad);
      ADD_FAILURE() << bad << " resolved";
    } catch (const Error& err) {
      EXPECT_EQ(err.kind, ErrorKind::Usage) << bad;
    }
  }
  // Through the CLI: exit 1 and the message.
  const auto r = test::cli({"info", "--model", "ollama:tiny:7b"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "its tags: latest")) << r.err;
}

TEST_F(Stores, UnreadableOrMissingStoresAreListedNotThrown) {
  // OLLAMA_MODELS naming a file, LLAMA_CACHE naming nothing, an HF cache that is a symlink loop.
  const std::string d = test::temp_dir("stores-bad");
  write(d + "/file", "x");
  fs::create_symlink(d + "/hub", d + "/hub");
  setenv("OLLAMA_MODELS", (d + "/file").c_str(), 1);
  setenv("LLAMA_CACHE", (d + "/none").c_str(), 1);
  setenv("HF_HUB_CACHE", (d + "/hub").c_str(), 1);
  const auto by = listed();
  ASSERT_TRUE(by.count("ollama (store)"));
  EXPECT_EQ(by.at("ollama (store)")["path"], d + "/file");
  EXPECT_NE(by.at("ollama (store)")["reason"].get<std::string>().find("not a readable folder"), std::string::npos);
  ASSERT_TRUE(by.count("llamacpp (store)"));
  ASSERT_TRUE(by.count("hf (store)"));
  EXPECT_NE(by.at("hf (store)")["reason"].get<std::string>().find("symlink loop"), std::string::npos);
  const std::string e = resolve_error("ollama:tiny");
  EXPECT_NE(e.find("the Ollama store '" + d + "/file' is not a readable folder"), std::string::npos) << e;
}

TEST(StoreNames, FileTypesAsLlamaCppNamesThem) {
  EXPECT_EQ(gguf_file_type_name(0), "F32");
  EXPECT_EQ(gguf_file_type_name(15), "Q4_K_M");
  EXPECT_EQ(gguf_file_type_name(32), "BF16");
  EXPECT_EQ(gguf_file_type_name(38), "MXFP4_MOE");
  EXPECT_EQ(gguf_file_type_name(4), "type 4");
  EXPECT_TRUE(is_store_name("ollama:x"));
  EXPECT_TRUE(is_store_name("hf:a/b"));
  EXPECT_FALSE(is_store_name("builtin:x"));
  EXPECT_FALSE(is_store_name("/models/ollama:x"));
}

// What `models` reads of a GGUF file: scalars kept, arrays stepped over but checked, no
// tensor infos (a tensor of a type attnviz cannot read does not stop the listing).
TEST(StoreNames, GgufMetadataStepsOverArraysAndTensors) {
  const std::string dir = test::temp_dir("stores-meta");
  GgufWriter g;
  g.set_string("general.architecture", "llama");
  g.set_strings("tokenizer.ggml.tokens", {"a", "bb", "ccc"});
  g.set_f32s("tokenizer.ggml.scores", {1.f, 2.f, 3.f});
  g.set_string("general.name", "after the arrays");
  g.add_f32("t", {2}, {1.f, 2.f});
  g.type_override["t"] = 99;  // no such ggml type: open() refuses it, open_metadata() never reads it
  g.write(dir + "/m.gguf");
  const GgufFile f = GgufFile::open_metadata(dir + "/m.gguf");
  EXPECT_EQ(f.get_string("general.name"), "after the arrays");
  EXPECT_EQ(f.find_key("tokenizer.ggml.tokens")->array_type, GgufValueType::STRING);
  EXPECT_EQ(f.find_key("tokenizer.ggml.tokens")->array_size(), 0u);
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_THROW(GgufFile::open(dir + "/m.gguf"), Error);
  // A string array cut short is still refused.
  const std::string bytes = g.header();
  const size_t cut = bytes.find("ccc");
  test::write_bytes(dir + "/cut.gguf", bytes.substr(0, cut + 1));
  EXPECT_THROW(GgufFile::open_metadata(dir + "/cut.gguf"), Error);
}

}  // namespace
}  // namespace attnviz
