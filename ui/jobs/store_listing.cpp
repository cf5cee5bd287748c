#include "ui/jobs/store_listing.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "core/model/model.h"
#include "ui/jobs/wake.h"

namespace attnviz::ui {

StoreListing::~StoreListing() {
  if (thread_.joinable()) thread_.join();
}

void StoreListing::refresh() {
  if (running_.exchange(true)) return;
  if (thread_.joinable()) thread_.join();  // the last listing's thread, which has ended
  thread_ = std::thread([this] {
    auto list = std::make_shared<const std::vector<StoredModel>>(list_stored_models());  // never throws
    {
      std::lock_guard<std::mutex> lock(mu_);
      models_ = std::move(list);
    }
    running_ = false;
    wake_ui();
  });
}

std::shared_ptr<const std::vector<StoredModel>> StoreListing::models() const {
  std::lock_guard<std::mutex> lock(mu_);
  return models_;
}

namespace {
std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string with_commas(uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}
}  // namespace

bool store_entry_matches(const StoredModel& m, const std::string& filter) {
  const std::string hay = lower(m.name + "\n" + m.source + "\n" + m.architecture + "\n" + m.file_type + "\n" + m.path);
  std::istringstream words(lower(filter));
  for (std::string w; words >> w;)
    if (hay.find(w) == std::string::npos) return false;
  return true;
}

std::string store_entry_spec(const StoredModel& m) { return stored_model_spec(m); }

namespace {
bool ends_with_gguf(const std::string& n) { return n.size() > 5 && lower(n.substr(n.size() - 5)) == ".gguf"; }
}  // namespace

std::vector<FolderEntry> list_folder(const std::string& dir, std::string* error) {
  namespace fs = std::filesystem;
  std::vector<FolderEntry> dirs, files;
  error->clear();
  std::error_code ec;
  fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
  if (ec) {
    *error = "cannot read '" + dir + "': " + ec.message();
    return {};
  }
  for (; it != end && dirs.size() + files.size() < 100000; it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code e2;
    if (it->is_directory(e2)) {
      FolderEntry f;
      f.name = name, f.dir = true;
      f.model_dir = fs::is_regular_file(it->path() / "config.json", e2);
      dirs.push_back(std::move(f));
    } else if (ends_with_gguf(name) && it->is_regular_file(e2)) {
      FolderEntry f;
      f.name = name;
      f.bytes = it->file_size(e2);
      files.push_back(std::move(f));
    }
  }
  if (ec) *error = "stopped reading '" + dir + "': " + ec.message();
  const auto by_name = [](const FolderEntry& a, const FolderEntry& b) { return a.name < b.name; };
  std::sort(dirs.begin(), dirs.end(), by_name);
  std::sort(files.begin(), files.end(), by_name);
  dirs.insert(dirs.end(), files.begin(), files.end());
  return dirs;
}

bool openable_path(const std::string& path, std::string* why) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    *why = "'" + path + "' does not exist" + (ec ? " (" + ec.message() + ")" : "");
    return false;
  }
  if (fs::is_directory(st)) {
    if (fs::is_regular_file(fs::path(path) / "config.json", ec)) return true;
    *why = "the folder '" + path + "' holds no config.json (a model folder has config.json and model.safetensors)";
    return false;
  }
  if (fs::is_regular_file(st) && ends_with_gguf(path)) return true;
  *why = "'" + path + "' is not a .gguf file or a model folder";
  return false;
}

ModelDetails describe_config(const ModelConfig& c) {
  ModelDetails d;
  const std::string dot = " \xC2\xB7 ";  // U+00B7
  std::string shape = std::to_string(c.n_layer) + " layers" + dot + std::to_string(c.n_head) + " query heads";
  // The per-layer sizes, as the GQA panel shows them (Gemma 4's global layers differ).
  int kv_lo = c.n_kv_head, kv_hi = c.n_kv_head, d_lo = c.head_size, d_hi = c.head_size;
  for (int l = 0; l < c.n_layer; ++l) {
    if (c.layer(l).mixer != Mixer::Softmax) continue;
    kv_lo = std::min(kv_lo, c.kv_heads_at(l)), kv_hi = std::max(kv_hi, c.kv_heads_at(l));
    d_lo = std::min(d_lo, c.head_size_at(l)), d_hi = std::max(d_hi, c.head_size_at(l));
  }
  const auto range = [](int lo, int hi) { return lo == hi ? std::to_string(lo) : std::to_string(lo) + "/" + std::to_string(hi); };
  shape += dot + range(kv_lo, kv_hi) + " KV heads";
  if (kv_lo == kv_hi && kv_lo > 0 && kv_lo < c.n_head) shape += " (" + std::to_string(c.n_head / kv_lo) + " queries each)";
  shape += dot + "head size " + range(d_lo, d_hi);
  shape += dot + "context " + std::to_string(c.n_ctx);
  d.shape = shape;
  d.features = c.features();
  d.params = with_commas(static_cast<uint64_t>(parameter_counts(c).total())) + " parameters";
  return d;
}

ModelDetails model_details(const std::string& path) {
  try {
    return describe_config(read_model_config(path));
  } catch (const std::exception& e) {
    ModelDetails d;
    d.error = e.what();
    return d;
  }
}

}  // namespace attnviz::ui
