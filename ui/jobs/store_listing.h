// What the model browser (File → Open model…) shows, without ImGui: the model stores
// listed off the UI thread, the filter, the name a store entry opens by, and the details
// of a selected model (what the GQA panel would say about it). Unit-tested in
// tests/test_model_loader.cpp.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/model/config.h"
#include "core/model/stores.h"

namespace attnviz::ui {

// list_stored_models() on a thread of its own (it reads every store's headers: under a
// second for a hundred models, but a store on a slow disk must not hold up a frame).
class StoreListing {
 public:
  StoreListing() = default;
  ~StoreListing();  // joins
  StoreListing(const StoreListing&) = delete;
  StoreListing& operator=(const StoreListing&) = delete;

  // Lists the stores again, unless a listing is running.
  void refresh();
  bool running() const { return running_.load(); }
  // The last complete listing (null before the first has finished).
  std::shared_ptr<const std::vector<StoredModel>> models() const;

 private:
  mutable std::mutex mu_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::shared_ptr<const std::vector<StoredModel>> models_;
};

// Whether `m` is shown under `filter`: each of its words (split at spaces, compared without
// case) appears in the entry's name, source, architecture, file type or path.
bool store_entry_matches(const StoredModel& m, const std::string& filter);

// What opens `m` (and what the recent list then shows): "ollama:NAME" for an Ollama model,
// "hf:ORG/NAME" for a Hugging Face model directory, its path otherwise (a GGUF file).
std::string store_entry_spec(const StoredModel& m);

// One entry of the browser's file list.
struct FolderEntry {
  std::string name;
  bool dir = false;
  bool model_dir = false;  // a folder holding config.json
  uint64_t bytes = 0;      // a file's size
};
// What the file list shows of the folder `dir`: its sub-folders, then its .gguf files, each
// by name; hidden ones (".name") left out. An unreadable folder gives nothing and the
// reason in *error (which is cleared otherwise). Never throws.
std::vector<FolderEntry> list_folder(const std::string& dir, std::string* error);
// Whether `path` is something to open: a .gguf file or a folder with config.json. When it
// is not, *why says what it is (for a dropped file).
bool openable_path(const std::string& path, std::string* why);

// What the model browser says of a model before opening it, from its config alone:
//   shape     "24 layers · 14 query heads · 2 KV heads (7 queries each) · head size 64"
//   features  ModelConfig::features() ("window 4096 on layers 0,2,4", "" for plain models)
//   params    "494,032,768 parameters"
struct ModelDetails {
  std::string shape, features, params;
  std::string error;  // why the config could not be read ("" when it was)
};
ModelDetails describe_config(const ModelConfig& c);
// The details of the model at `path` (a model directory or a GGUF file; a store name too):
// its config.json, or the GGUF file's metadata (no weight is read). Never throws.
ModelDetails model_details(const std::string& path);

}  // namespace attnviz::ui
