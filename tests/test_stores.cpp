// The model stores (core/model/stores.h) on fake stores built in a temporary HOME: an Ollama
// store (a manifest with model, template, params and projector layers; a real GGUF blob), a
// Hugging Face cache (files symlinked into blobs/, two revisions), an LM Studio tree (a model
// and its mmproj) and llama.cpp's cache. Checks `models --json`, the ollama:/hf: names (they
// resolve and load), each refusal reason, and the bad inputs: a manifest that is not JSON, a
// missing blob, a blob that is not GGUF, a symlink loop, an unknown tag, an unreadable store.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

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

// Every entry listed as opening opens with what --model is given for it (the same file or
// snapshot): the listing never shows a name --model refuses as opening.
void expect_opening_entries_resolve(const std::vector<StoredModel>& models) {
  for (const StoredModel& m : models) {
    if (!m.opens) continue;
    const std::string spec = stored_model_spec(m);
    try {
      EXPECT_EQ(resolve_model_dir(spec), m.path) << spec;
    } catch (const Error& e) {
      ADD_FAILURE() << "listed as opening, but --model " << spec << " is refused: " << e.what();
    }
  }
}

TEST_F(Stores, EveryOpeningEntryOpensWithItsName) { expect_opening_entries_resolve(list_stored_models()); }

// `models`' entries in a fresh HOME of their own (built by the test), and how long it took.
struct Listing {
  std::vector<StoredModel> models;
  double seconds = 0;
  std::map<std::string, StoredModel> by;  // source + " " + name, or source + " (store) " + path
  const StoredModel* problem_at(const std::string& path, const std::string& part) const {
    for (const auto& m : models)
      if (m.name == "(store)" && m.path == path && m.reason.find(part) != std::string::npos) return &m;
    return nullptr;
  }
};
Listing list_in(const std::string& home) {
  StoreEnv env(home);
  Listing l;
  const auto t0 = std::chrono::steady_clock::now();
  l.models = list_stored_models();
  l.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& m : l.models) l.by[m.source + " " + m.name] = m;
  expect_opening_entries_resolve(l.models);
  return l;
}

std::string write_tiny_blob(const std::string& path) {
  write_metadata_gguf(path, "llama", 15);
  return path;
}

// A folder reached again through a symlink is walked once: links to "." in an Ollama
// manifests/ folder and at the top of LM Studio's store would otherwise multiply the paths
// with every level (8 links over 4 levels: 4,096 names for one manifest).
TEST(StoreWalk, SymlinkedFoldersAreWalkedOnce) {
  const std::string h = test::temp_dir("stores-links");
  const std::string o = h + "/.ollama/models";
  write_tiny_blob(o + "/blobs/sha256-" + kHexA);
  write(o + "/manifests/registry.ollama.ai/library/m/latest", ollama_manifest("sha256:" + kHexA));
  for (int i = 0; i < 8; ++i) {
    fs::create_symlink(".", o + "/manifests/l" + std::to_string(i));
    fs::create_symlink(".", o + "/manifests/registry.ollama.ai/l" + std::to_string(i));
  }
  const std::string lms = h + "/.lmstudio/models";
  write_tiny_blob(lms + "/pub/repo/m.gguf");
  for (int i = 0; i < 400; ++i) fs::create_symlink(".", lms + "/up" + std::to_string(i));
  fs::create_symlink("..", lms + "/pub/repo/parent");  // a loop one level down
  const Listing l = list_in(h);
  size_t ollama = 0, lmstudio = 0;
  std::set<std::string> paths;
  for (const auto& m : l.models) {
    if (m.name == "(store)") continue;
    (m.source == "ollama" ? ollama : lmstudio) += 1;
    EXPECT_TRUE(paths.insert(m.source + m.path).second) << "listed twice: " << m.path << " as " << m.name;
  }
  EXPECT_EQ(ollama, 1u);
  EXPECT_EQ(lmstudio, 1u);
  ASSERT_TRUE(l.by.count("ollama m:latest"));
  EXPECT_TRUE(l.by.at("ollama m:latest").opens);
  EXPECT_TRUE(l.by.count("lmstudio pub/repo/m.gguf"));
  EXPECT_TRUE(l.problem_at(o + "/manifests/l0", "the same folder as")) << "a link back is said, not walked";
  EXPECT_LT(l.seconds, 5.0);
}

// A symlink leading out of its store, a FIFO, a loop: each entry is listed as not opening with
// its reason, and nothing blocks on the FIFO.
TEST(StoreWalk, EntriesLeadingOutOrNotFilesDoNotOpen) {
  const std::string h = test::temp_dir("stores-outside");
  const std::string elsewhere = test::temp_dir("stores-elsewhere");
  write_tiny_blob(elsewhere + "/real.gguf");
  write_tiny_blob(elsewhere + "/pub/repo/far.gguf");
  write(elsewhere + "/manifest", ollama_manifest("sha256:" + kHexA));
  // llama.cpp's cache: a GGUF symlinked from elsewhere, a FIFO, a loop, a symlink into the store.
  const std::string lc = h + "/.cache/llama.cpp";
  write_tiny_blob(lc + "/inside.gguf");
  fs::create_symlink(elsewhere + "/real.gguf", lc + "/outside.gguf");
  ASSERT_EQ(::mkfifo((lc + "/pipe.gguf").c_str(), 0600), 0);
  fs::create_symlink("loop.gguf", lc + "/loop.gguf");
  fs::create_symlink("inside.gguf", lc + "/alias.gguf");
  // LM Studio: a publisher folder that is a symlink to a folder elsewhere.
  fs::create_directories(h + "/.lmstudio/models");
  fs::create_symlink(elsewhere + "/pub", h + "/.lmstudio/models/pub");
  // Ollama: a manifest symlinked from elsewhere; a blob symlinked from elsewhere.
  const std::string o = h + "/.ollama/models", lib = o + "/manifests/registry.ollama.ai/library";
  fs::create_directories(lib + "/far");
  fs::create_symlink(elsewhere + "/manifest", lib + "/far/latest");
  fs::create_directories(o + "/blobs");
  fs::create_symlink(elsewhere + "/real.gguf", o + "/blobs/sha256-" + kHexA);
  write(lib + "/near/latest", ollama_manifest("sha256:" + kHexA));

  const Listing l = list_in(h);
  auto reason = [&](const std::string& key) {
    EXPECT_TRUE(l.by.count(key)) << key;
    if (!l.by.count(key)) return std::string();
    EXPECT_FALSE(l.by.at(key).opens) << key;
    return l.by.at(key).reason;
  };
  EXPECT_TRUE(l.by.at("llamacpp inside.gguf").opens);
  EXPECT_TRUE(l.by.at("llamacpp alias.gguf").opens);  // a symlink inside the store is followed
  EXPECT_NE(reason("llamacpp outside.gguf").find("outside the store"), std::string::npos);
  EXPECT_NE(reason("llamacpp pipe.gguf").find("a FIFO"), std::string::npos);
  EXPECT_NE(reason("llamacpp loop.gguf").find("symlink loop"), std::string::npos);
  EXPECT_FALSE(l.by.count("lmstudio pub/repo/far.gguf"));
  EXPECT_TRUE(l.problem_at(h + "/.lmstudio/models/pub", "outside the store"));
  EXPECT_NE(reason("ollama far:latest").find("outside the store"), std::string::npos);
  EXPECT_NE(reason("ollama near:latest").find("outside the store"), std::string::npos);
  // --model refuses them too.
  StoreEnv env(h);
  for (const char* spec : {"ollama:far", "ollama:near"}) {
    try {
      resolve_model_dir(spec);
      ADD_FAILURE() << spec << " resolved";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("outside the store"), std::string::npos) << e.what();
    }
  }
}

// Names --model refuses are not listed as opening: an Ollama name with a space or a leading
// dot, a Hugging Face folder models--..--x (which would be shown as "../x").
TEST(StoreWalk, NamesModelRefusesAreListedAsNotOpening) {
  const std::string h = test::temp_dir("stores-names");
  const std::string o = h + "/.ollama/models", lib = o + "/manifests/registry.ollama.ai/library";
  write_tiny_blob(o + "/blobs/sha256-" + kHexA);
  for (const char* name : {"with space", ".hidden", "fine"})
    write(lib + "/" + name + "/latest", ollama_manifest("sha256:" + kHexA));
  write(lib + "/fine/.tag", ollama_manifest("sha256:" + kHexA));
  const std::string hub = h + "/.cache/huggingface/hub";
  const std::string model = test::make_model_dir(test::small_config("llama", 1, 16, 2, 2, 32, 8), 3, "stores-names-hf");
  for (const char* folder : {"models--..--x", "models--org--ok"}) {
    fs::create_directories(hub + "/" + folder + "/snapshots");
    fs::copy(model, hub + "/" + folder + "/snapshots/" + kCommitMain, fs::copy_options::recursive);
    write(hub + "/" + folder + "/refs/main", kCommitMain);
  }
  const Listing l = list_in(h);
  EXPECT_TRUE(l.by.at("ollama fine:latest").opens);
  EXPECT_TRUE(l.by.at("hf org/ok").opens) << l.by.at("hf org/ok").reason;
  for (const char* key : {"ollama with space:latest", "ollama .hidden:latest", "ollama fine:.tag", "hf ../x"}) {
    ASSERT_TRUE(l.by.count(key)) << key;
    EXPECT_FALSE(l.by.at(key).opens) << key;
    EXPECT_NE(l.by.at(key).reason.find("not one --model takes"), std::string::npos) << l.by.at(key).reason;
  }
}

// A refs/main that is a symlink out of the cache is refused, and a ref's bytes are never
// quoted back unless they are a commit hash.
TEST(StoreWalk, HuggingFaceRefsStayInsideAndAreNotEchoed) {
  const std::string h = test::temp_dir("stores-refs");
  const std::string elsewhere = test::temp_dir("stores-refs-elsewhere");
  write(elsewhere + "/secret", "s3cr3t-token-value");
  const std::string hub = h + "/.cache/huggingface/hub";
  fs::create_directories(hub + "/models--org--out/refs");
  fs::create_directories(hub + "/models--org--out/snapshots/" + kCommitMain);
  fs::create_symlink(elsewhere + "/secret", hub + "/models--org--out/refs/main");
  write(hub + "/models--org--junk/refs/main", "not a commit!");
  write(hub + "/models--org--named/refs/main", "not-a-commit_but.safe");
  fs::create_directories(hub + "/models--org--junk/snapshots");
  fs::create_directories(hub + "/models--org--named/snapshots");
  const Listing l = list_in(h);
  ASSERT_TRUE(l.by.count("hf org/out"));
  EXPECT_FALSE(l.by.at("hf org/out").opens);
  EXPECT_NE(l.by.at("hf org/out").reason.find("outside the store"), std::string::npos) << l.by.at("hf org/out").reason;
  ASSERT_TRUE(l.by.count("hf org/junk"));
  EXPECT_NE(l.by.at("hf org/junk").reason.find("does not hold a commit"), std::string::npos);
  ASSERT_TRUE(l.by.count("hf org/named"));
  EXPECT_NE(l.by.at("hf org/named").reason.find("names a commit, which has no snapshot"), std::string::npos)
      << l.by.at("hf org/named").reason;
  StoreEnv env(h);
  for (const char* spec : {"hf:org/out", "hf:org/junk", "hf:org/named"}) {
    try {
      resolve_model_dir(spec);
      ADD_FAILURE() << spec << " resolved";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.find("s3cr3t"), std::string::npos) << m;
      EXPECT_EQ(m.find("not-a-commit"), std::string::npos) << m;
      EXPECT_EQ(m.find("commit!"), std::string::npos) << m;
    }
  }
}

// The caps say so: a folder of more than 10,000 entries, and a store of more than 20,000
// (30 folders of 700 files, each folder under the per-folder cap).
TEST(StoreWalk, CutFoldersAndStoresAreSaidSo) {
  const std::string h = test::temp_dir("stores-caps");
  const std::string lc = h + "/.cache/llama.cpp";
  fs::create_directories(lc);
  for (int i = 0; i <= 10000; ++i) test::write_bytes(lc + "/f" + std::to_string(i), "");
  const std::string lms = h + "/.lmstudio/models/pub";
  for (int r = 0; r < 30; ++r) {
    const std::string repo = lms + "/r" + std::to_string(r);
    fs::create_directories(repo);
    for (int i = 0; i < 700; ++i) test::write_bytes(repo + "/m" + std::to_string(i) + ".gguf", "");
  }
  const Listing l = list_in(h);
  EXPECT_TRUE(l.problem_at(lc, "more than 10000 entries")) << "the cut folder is named";
  EXPECT_TRUE(l.problem_at(h + "/.lmstudio/models", "the store holds more than 20000 entries"));
  size_t lmstudio = 0;
  for (const auto& m : l.models) lmstudio += m.source == "lmstudio" && m.name != "(store)";
  EXPECT_LE(lmstudio, 20000u);
  EXPECT_GT(lmstudio, 15000u);
  std::printf("listing 20,000 unreadable GGUF files and a folder of 10,001 took %.2f s\n", l.seconds);
}

// Listing stays near linear in the models: 2,000 Ollama tags of one blob.
TEST(StoreWalk, ManyTagsListQuickly) {
  const std::string h = test::temp_dir("stores-tags");
  const std::string o = h + "/.ollama/models";
  write_tiny_blob(o + "/blobs/sha256-" + kHexA);
  const std::string manifest = ollama_manifest("sha256:" + kHexA);
  for (int m = 0; m < 20; ++m)
    for (int t = 0; t < 100; ++t)
      write(o + "/manifests/registry.ollama.ai/library/m" + std::to_string(m) + "/t" + std::to_string(t), manifest);
  const Listing l = list_in(h);
  EXPECT_EQ(l.models.size(), 2000u);
  std::printf("listing 2,000 Ollama tags took %.2f s\n", l.seconds);
  EXPECT_LT(l.seconds, 4.0);  // under a second a thousand, with room for a loaded machine
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
