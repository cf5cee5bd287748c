#include "core/model/stores.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"
#include "core/model/config.h"
#include "core/model/gguf.h"
#include "core/model/gguf_model.h"

namespace attnviz {

namespace {

constexpr const char* kOllamaModelType = "application/vnd.ollama.image.model";
constexpr const char* kOllamaRegistry = "registry.ollama.ai";
constexpr const char* kListHint = "\n  HINT: attnviz-cli models lists the models the stores hold.";
// A store is listed at most this many entries a directory, so that a huge or hostile tree
// cannot make the listing take minutes (real stores hold tens to hundreds).
constexpr size_t kMaxDirEntries = 10000;
// How many names an error message lists before "…".
constexpr size_t kMaxNamesShown = 20;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
std::string home() { return env("HOME"); }

// What a path is, following symlinks; `why` says what is wrong for Loop and Unreadable.
enum class Kind { Missing, File, Dir, Other, Loop, Unreadable };
Kind kind_of(const std::string& path, std::string* why = nullptr) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0)
    return S_ISREG(st.st_mode) ? Kind::File : S_ISDIR(st.st_mode) ? Kind::Dir : Kind::Other;
  const int e = errno;
  if (why) *why = e == ELOOP ? "a symlink loop" : std::strerror(e);
  if (e == ENOENT || e == ENOTDIR) {
    struct stat lst {};
    if (why && ::lstat(path.c_str(), &lst) == 0) *why = "a symlink to a missing file";
    return Kind::Missing;
  }
  return e == ELOOP ? Kind::Loop : Kind::Unreadable;
}

uint64_t file_bytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
}

// The names in a directory, sorted, without "." and ".." (at most kMaxDirEntries). Throws
// attnviz::Error naming `what` when it cannot be read.
std::vector<std::string> list_dir(const std::string& dir, const std::string& what) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    const int e = errno;
    throw Error("cannot read " + what + " '" + excerpt(dir, kPathExcerptBytes) +
                "': " + (e == ELOOP ? std::string("a symlink loop") : std::strerror(e)));
  }
  std::vector<std::string> names;
  while (const dirent* ent = ::readdir(d)) {
    const std::string n = ent->d_name;
    if (n == "." || n == "..") continue;
    if (names.size() == kMaxDirEntries) break;
    names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// Visits every entry that is not a folder exactly `depth` levels below `dir` (`parts`: the
// names on the way, the entry's last), in name order, descending only into folders. A folder
// that cannot be read is passed to `unreadable` (its path, the reason) and skipped: one bad
// folder costs only what it holds.
using Visit = std::function<void(const std::vector<std::string>& parts, const std::string& path)>;
using Unreadable = std::function<void(const std::string& path, const std::string& reason)>;
void walk(const std::string& dir, int depth, const Visit& visit, const Unreadable& unreadable,
          std::vector<std::string> parts = {}) {
  std::vector<std::string> names;
  try {
    names = list_dir(dir, "the folder");
  } catch (const Error& e) {
    unreadable(dir, e.what());
    return;
  }
  for (const auto& n : names) {
    const std::string path = dir + "/" + n;
    const bool is_dir = kind_of(path) == Kind::Dir;
    parts.push_back(n);
    if (depth > 1 && is_dir) walk(path, depth - 1, visit, unreadable, parts);
    if (depth == 1 && !is_dir) visit(parts, path);
    parts.pop_back();
  }
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The first line of an error message without the "PATH: " or "GGUF file 'PATH': " it
// starts with (the listing shows the path beside it): the reason in a few words.
std::string short_reason(const Error& e, const std::string& path) {
  std::string s = e.what();
  s = s.substr(0, s.find('\n'));
  for (const std::string& prefix : {"GGUF file '" + path + "': ", "Ollama manifest '" + path + "': ", path + ": "})
    if (s.rfind(prefix, 0) == 0) return s.substr(prefix.size());
  return s;
}

// "a, b, c" of at most kMaxNamesShown names; "none" for none.
std::string name_list(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  std::string s;
  for (size_t i = 0; i < names.size() && i < kMaxNamesShown; ++i) s += (i ? ", " : "") + excerpt(names[i]);
  if (names.size() > kMaxNamesShown) s += ", … (" + std::to_string(names.size()) + " in all)";
  return s;
}

StoredModel entry(const std::string& source, const std::string& name, const std::string& path) {
  StoredModel e;
  e.source = source;
  e.name = name;
  e.path = path;
  return e;
}

// --- store roots (stores.h)

std::vector<std::string> ollama_defaults() { return {home() + "/.ollama/models", "/usr/share/ollama/.ollama/models"}; }
// $OLLAMA_MODELS, else the first default that exists ("" when none does).
std::string ollama_root() {
  if (const std::string e = env("OLLAMA_MODELS"); !e.empty()) return e;
  for (const auto& d : ollama_defaults())
    if (kind_of(d) == Kind::Dir) return d;
  return "";
}
std::string hf_root() {
  if (const std::string e = env("HF_HUB_CACHE"); !e.empty()) return e;
  if (const std::string e = env("HF_HOME"); !e.empty()) return e + "/hub";
  if (const std::string e = env("XDG_CACHE_HOME"); !e.empty()) return e + "/huggingface/hub";
  return home() + "/.cache/huggingface/hub";
}
std::string llamacpp_root() {
  if (const std::string e = env("LLAMA_CACHE"); !e.empty()) return e;
  return home() + "/.cache/llama.cpp";
}

// --- GGUF files (every store but Hugging Face's model directories)

// Fills architecture, file_type, bytes, opens and reason of `e` (path set) from the file's
// metadata; never throws.
void describe_gguf(StoredModel& e) {
  std::string why;
  const Kind k = kind_of(e.path, &why);
  if (k != Kind::File) {
    e.reason = k == Kind::Missing ? "the file is missing" + (why.empty() ? "" : " (" + why + ")")
               : k == Kind::Dir   ? "a directory, not a GGUF file"
               : k == Kind::Other ? "not a regular file"
                                  : why;
    return;
  }
  e.bytes = file_bytes(e.path);
  try {
    const GgufFile f = GgufFile::open_metadata(e.path);
    if (const GgufValue* a = f.find_key("general.architecture"); a && a->type == GgufValueType::STRING)
      e.architecture = a->s;
    if (const GgufValue* t = f.find_key("general.file_type"); t && t->is_int()) e.file_type = gguf_file_type_name(t->i);
    bool clip_keys = false;
    for (const auto& kv : f.metadata()) clip_keys |= kv.first.rfind("clip.", 0) == 0;
    if (e.architecture == "clip" || (e.architecture.empty() && clip_keys)) {
      e.architecture = "clip";
      e.reason = "a vision projector only";
    } else if (e.architecture.empty()) {
      e.reason = "no general.architecture in its metadata";
    } else if (!gguf_arch_supported(e.architecture)) {
      e.reason = "model type " + excerpt(e.architecture) + " is not supported";
    } else {
      e.opens = true;
    }
  } catch (const Error& err) {
    e.reason = short_reason(err, e.path);
  }
}

// An unreadable store (or a store root an environment variable names that is not there).
StoredModel store_problem(const std::string& source, const std::string& root, const std::string& reason) {
  StoredModel e = entry(source, "(store)", root);
  e.reason = reason;
  return e;
}

// Every *.gguf `depth` levels below `root` as an entry named by its path under `root`,
// prefixed with `prefix` ("" for the stores, "ORG/NAME/" in a Hugging Face snapshot).
void add_gguf_files(const std::string& source, const std::string& root, int depth, const std::string& prefix,
                    std::vector<StoredModel>& out) {
  walk(
      root, depth,
      [&](const std::vector<std::string>& parts, const std::string& path) {
        if (!ends_with(parts.back(), ".gguf")) return;
        std::string name = prefix;
        for (size_t i = 0; i < parts.size(); ++i) name += (i ? "/" : "") + parts[i];
        StoredModel e = entry(source, name, path);
        describe_gguf(e);
        out.push_back(std::move(e));
      },
      [&](const std::string& path, const std::string& reason) { out.push_back(store_problem(source, path, reason)); });
}

// --- Ollama

// One path component of a model name: letters, digits, '.', '_', '-', not starting with '.'
// (so never "..", and never a path of its own).
bool safe_component(const std::string& s) {
  if (s.empty() || s.size() > 255 || s[0] == '.') return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

std::string ollama_name(const std::string& registry, const std::string& ns, const std::string& model,
                        const std::string& tag) {
  const std::string base = registry != kOllamaRegistry ? registry + "/" + ns + "/" + model
                           : ns != "library"           ? ns + "/" + model
                                                       : model;
  return base + ":" + tag;
}

// The blob of the manifest's model layer (blobs/sha256-HEX under `root`). Throws when the
// manifest is not JSON, has no model layer, or names a blob that is not there.
std::string ollama_blob(const std::string& root, const std::string& manifest) {
  const std::string hint = "\n  HINT: pull the model again with ollama (the manifest is damaged).";
  const nlohmann::json j = read_json_file(manifest, "Ollama manifest", hint);
  const std::string where = "Ollama manifest '" + excerpt(manifest, kPathExcerptBytes) + "': ";
  if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array())
    throw Error(where + "no \"layers\" list" + hint);
  for (const auto& layer : j["layers"]) {
    if (!layer.is_object() || !layer.contains("mediaType") || layer["mediaType"] != kOllamaModelType) continue;
    const std::string digest =
        layer.contains("digest") && layer["digest"].is_string() ? layer["digest"].get<std::string>() : "";
    const std::string hex = digest.rfind("sha256:", 0) == 0 ? digest.substr(7) : "";
    const bool ok = hex.size() == 64 && std::all_of(hex.begin(), hex.end(), [](char c) {
                      return std::isxdigit(static_cast<unsigned char>(c));
                    });
    if (!ok)
      throw Error(where + "the model layer's digest " + excerpt(digest) + " is not sha256:<64 hex digits>" + hint);
    const std::string blob = root + "/blobs/sha256-" + hex;
    std::string why;
    const Kind k = kind_of(blob, &why);
    if (k == Kind::Missing) throw Error(where + "its model blob '" + blob + "' is missing" + hint);
    if (k != Kind::File)
      throw Error(where + "its model blob '" + blob + "' is not a regular file" +
                  (why.empty() ? "" : " (" + why + ")") + hint);
    return blob;
  }
  throw Error(where + "no layer of mediaType " + kOllamaModelType + " (the model's weights)" + hint);
}

void list_ollama(std::vector<StoredModel>& out) {
  const std::string root = ollama_root();
  if (root.empty()) return;
  std::string why;
  if (kind_of(root, &why) != Kind::Dir) {
    out.push_back(
        store_problem("ollama", root, "the store is not a readable folder" + (why.empty() ? "" : " (" + why + ")")));
    return;
  }
  const std::string manifests = root + "/manifests";
  if (kind_of(manifests) == Kind::Missing) return;  // an empty store
  // manifests/REGISTRY/NAMESPACE/NAME/TAG
  walk(
      manifests, 4,
      [&](const std::vector<std::string>& p, const std::string& manifest) {
        StoredModel e = entry("ollama", ollama_name(p[0], p[1], p[2], p[3]), manifest);
        try {
          e.path = ollama_blob(root, manifest);
          describe_gguf(e);
        } catch (const Error& err) {
          e.reason = short_reason(err, manifest);
        }
        out.push_back(std::move(e));
      },
      [&](const std::string& path, const std::string& reason) {
        out.push_back(store_problem("ollama", path, reason));
      });
}

// "ollama:NAME[:TAG]" → the model blob.
std::string resolve_ollama(const std::string& spec) {
  std::string name = spec.substr(7), tag = "latest";
  if (const size_t colon = name.rfind(':'); colon != std::string::npos) {
    tag = name.substr(colon + 1);
    name = name.substr(0, colon);
  }
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t slash = name.find('/', start);
    parts.push_back(name.substr(start, slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  bool ok = parts.size() <= 3 && safe_component(tag);
  for (const auto& p : parts) ok = ok && safe_component(p);
  if (!ok)
    throw Error("'" + excerpt(spec) + "' is not an Ollama model name (ollama:NAME[:TAG], NAME as gemma3, " +
                    "namespace/name or registry/namespace/name; letters, digits, '.', '_', '-')" + kListHint,
                ErrorKind::Usage);
  if (parts.size() == 1) parts.insert(parts.begin(), "library");
  if (parts.size() == 2) parts.insert(parts.begin(), kOllamaRegistry);
  const std::string root = ollama_root();
  if (root.empty()) {
    std::string looked;
    for (const auto& d : ollama_defaults()) looked += "\n    " + d;
    throw Error("no Ollama store for '" + excerpt(spec) + "': $OLLAMA_MODELS is not set and none of these exists:" +
                looked + "\n  HINT: pull the model with `ollama pull " + excerpt(spec.substr(7)) +
                "`, or set OLLAMA_MODELS to the store's folder.");
  }
  std::string why;
  if (kind_of(root, &why) != Kind::Dir)
    throw Error("the Ollama store '" + root + "' is not a readable folder" + (why.empty() ? "" : " (" + why + ")") +
                "\n  HINT: set OLLAMA_MODELS to the folder holding manifests/ and blobs/, or unset it.");
  const std::string model_dir = root + "/manifests/" + parts[0] + "/" + parts[1] + "/" + parts[2];
  const std::string manifest = model_dir + "/" + tag;
  const std::string shown = ollama_name(parts[0], parts[1], parts[2], tag);
  const Kind k = kind_of(manifest, &why);
  if (k == Kind::Missing) {
    if (kind_of(model_dir) == Kind::Dir)
      throw Error("Ollama has no tag '" + tag + "' of " + shown.substr(0, shown.size() - tag.size() - 1) +
                  " (no manifest '" + manifest + "'); its tags: " + name_list(list_dir(model_dir, "the Ollama store")) +
                  kListHint);
    std::vector<StoredModel> found;
    list_ollama(found);
    std::vector<std::string> have;
    for (const auto& e : found)
      if (e.name != "(store)") have.push_back(e.name);
    throw Error("no Ollama model '" + excerpt(shown) + "' in '" + root + "' (no manifest '" + manifest +
                "'); the store holds: " + name_list(have) + kListHint);
  }
  if (k != Kind::File)
    throw Error("Ollama manifest '" + manifest + "' is not a readable file" + (why.empty() ? "" : " (" + why + ")") +
                kListHint);
  const std::string blob = ollama_blob(root, manifest);
  if (!looks_like_gguf(blob))
    throw Error("the model blob of ollama:" + excerpt(shown) + " ('" + blob +
                "') is not a GGUF file (it does not start with \"GGUF\")" +
                "\n  HINT: pull the model again with ollama (the blob is damaged).");
  return blob;
}

// --- Hugging Face cache

// "models--ORG--NAME" → "ORG/NAME" ("" for a folder that is not a model repository).
std::string hf_repo_name(const std::string& folder) {
  const std::string prefix = "models--";
  if (folder.rfind(prefix, 0) != 0 || folder.size() == prefix.size()) return "";
  std::string rest = folder.substr(prefix.size());
  if (const size_t sep = rest.find("--"); sep != std::string::npos) rest.replace(sep, 2, "/");
  return rest;
}

// The snapshot folder of `rev` in a repository folder: refs/REV holds a commit, or REV is a
// commit under snapshots/. Throws naming both and what is there.
std::string hf_revision_dir(const std::string& repo, const std::string& name, const std::string& rev) {
  std::string commit;
  std::string why;
  const std::string ref = repo + "/refs/" + rev;
  const Kind k = kind_of(ref, &why);
  if (k == Kind::File) {
    commit = read_regular_file(ref, 256, "Hugging Face ref");
    while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
    if (!safe_component(commit))
      throw Error("Hugging Face ref '" + ref + "' holds " + excerpt(commit) + ", not a commit" +
                  "\n  HINT: download the model again (huggingface-cli download " + excerpt(name) + ").");
  } else if (k == Kind::Loop || k == Kind::Unreadable) {
    throw Error("Hugging Face ref '" + ref + "': " + why);
  } else {
    commit = rev;
  }
  const std::string snap = repo + "/snapshots/" + commit;
  const Kind s = kind_of(snap, &why);
  if (s == Kind::Dir) return snap;
  if (s == Kind::Loop || s == Kind::Unreadable) throw Error("Hugging Face snapshot '" + snap + "': " + why);
  std::vector<std::string> refs, snaps;
  if (kind_of(repo + "/refs") == Kind::Dir) refs = list_dir(repo + "/refs", "the Hugging Face cache");
  if (kind_of(repo + "/snapshots") == Kind::Dir) snaps = list_dir(repo + "/snapshots", "the Hugging Face cache");
  throw Error("Hugging Face model " + excerpt(name) + " has no revision '" + excerpt(rev) + "' in '" + repo + "' (" +
              (k == Kind::File ? "refs/" + rev + " names commit " + commit + ", which has no snapshot"
                               : "no refs/" + rev + " and no snapshots/" + rev) +
              "); refs: " + name_list(refs) + "; snapshots: " + name_list(snaps) + kListHint);
}

std::vector<std::string> gguf_names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& n : list_dir(dir, "the snapshot"))
    if (ends_with(n, ".gguf")) out.push_back(n);
  return out;
}

// A string field of config.json, or of its text_config (multimodal checkpoints).
std::string config_string(const nlohmann::json& j, const char* key) {
  if (j.contains("text_config") && j["text_config"].is_object() && j["text_config"].contains(key) &&
      j["text_config"][key].is_string())
    return j["text_config"][key].get<std::string>();
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// A model directory (a snapshot with config.json): architecture and dtype from config.json,
// bytes of its weight files (*.safetensors, *.bin, followed through symlinks), and whether
// attnviz reads it (parse_config accepts it and its safetensors weights are there).
void describe_model_dir(StoredModel& e) {
  const std::string cfg = e.path + "/config.json";
  try {
    for (const auto& n : list_dir(e.path, "the snapshot"))
      if (ends_with(n, ".safetensors") || ends_with(n, ".bin")) e.bytes += file_bytes(e.path + "/" + n);
    const nlohmann::json j = read_json_file(cfg, "config.json");
    if (j.is_object()) {
      e.architecture = config_string(j, "model_type");
      e.file_type = config_string(j, "torch_dtype");
      if (e.file_type.empty()) e.file_type = config_string(j, "dtype");
    }
    parse_config(j, cfg);
    std::string why;
    const Kind w = kind_of(e.path + "/model.safetensors", &why);
    if (w != Kind::File && kind_of(e.path + "/model.safetensors.index.json") != Kind::File)
      e.reason = "no model.safetensors or model.safetensors.index.json" +
                 (w == Kind::Loop || w == Kind::Unreadable ? " (model.safetensors: " + why + ")" : "");
    else
      e.opens = true;
  } catch (const Error& err) {
    e.reason = short_reason(err, cfg);
  }
}

// The entries of one snapshot: the model directory, or each of its .gguf files.
void add_hf_snapshot(const std::string& name, const std::string& snap, std::vector<StoredModel>& out) {
  std::string why;
  const Kind k = kind_of(snap + "/config.json", &why);
  if (k == Kind::Loop || k == Kind::Unreadable) {
    StoredModel e = entry("hf", name, snap);
    e.reason = "config.json: " + why;
    out.push_back(std::move(e));
    return;
  }
  if (k == Kind::File) {
    StoredModel e = entry("hf", name, snap);
    describe_model_dir(e);
    out.push_back(std::move(e));
    return;
  }
  const size_t before = out.size();
  add_gguf_files("hf", snap, 1, name + "/", out);
  if (out.size() == before) {
    StoredModel e = entry("hf", name, snap);
    e.reason = "neither config.json nor a .gguf file" + (why.empty() ? "" : " (config.json is " + why + ")");
    out.push_back(std::move(e));
  }
}

void list_hf(std::vector<StoredModel>& out) {
  const std::string root = hf_root();
  std::string why;
  const Kind k = kind_of(root, &why);
  if (k == Kind::Missing) return;
  if (k != Kind::Dir) {
    out.push_back(
        store_problem("hf", root, "the cache is not a readable folder" + (why.empty() ? "" : " (" + why + ")")));
    return;
  }
  try {
    for (const auto& folder : list_dir(root, "the Hugging Face cache")) {
      const std::string name = hf_repo_name(folder);
      if (name.empty()) continue;  // datasets--, spaces--, .locks
      try {
        add_hf_snapshot(name, hf_revision_dir(root + "/" + folder, name, "main"), out);
      } catch (const Error& err) {
        StoredModel e = entry("hf", name, root + "/" + folder);
        e.reason = short_reason(err, e.path);
        out.push_back(std::move(e));
      }
    }
  } catch (const Error& err) {
    out.push_back(store_problem("hf", root, short_reason(err, root)));
  }
}

// "hf:ORG/NAME[@REVISION]" → the snapshot folder, or its only .gguf file.
std::string resolve_hf(const std::string& spec) {
  std::string name = spec.substr(3), rev = "main";
  if (const size_t at = name.find('@'); at != std::string::npos) {
    rev = name.substr(at + 1);
    name = name.substr(0, at);
  }
  const size_t slash = name.find('/');
  bool ok =
      safe_component(name.substr(0, slash)) && (slash == std::string::npos || safe_component(name.substr(slash + 1)));
  // A ref may hold '/' (refs/pr/1): each of its parts must be a safe component.
  for (size_t start = 0; ok;) {
    const size_t s = rev.find('/', start);
    ok = safe_component(rev.substr(start, s - start));
    if (s == std::string::npos) break;
    start = s + 1;
  }
  if (!ok)
    throw Error("'" + excerpt(spec) + "' is not a Hugging Face model name (hf:ORG/NAME[@REVISION]; letters, digits, " +
                    "'.', '_', '-')" + kListHint,
                ErrorKind::Usage);
  const std::string root = hf_root();
  std::string folder = "models--" + name;
  if (slash != std::string::npos) folder.replace(8 + slash, 1, "--");
  const std::string repo = root + "/" + folder;
  if (kind_of(repo) != Kind::Dir) {
    std::vector<std::string> have;
    if (kind_of(root) == Kind::Dir)
      for (const auto& f : list_dir(root, "the Hugging Face cache"))
        if (const std::string n = hf_repo_name(f); !n.empty()) have.push_back(n);
    throw Error("no Hugging Face model " + excerpt(name) + " in the cache '" + root + "' (no folder " + folder +
                "); the cache holds: " + name_list(have) + "\n  HINT: download it with `huggingface-cli download " +
                excerpt(name) + "` (HF_HUB_CACHE or HF_HOME choose the cache), or see attnviz-cli models.");
  }
  const std::string snap = hf_revision_dir(repo, name, rev);
  std::string why;
  const Kind k = kind_of(snap + "/config.json", &why);
  if (k == Kind::File) return snap;
  if (k != Kind::Missing) throw Error("'" + snap + "/config.json': " + why + "\n  HINT: download the model again.");
  const auto ggufs = gguf_names_in(snap);
  if (ggufs.size() == 1) return snap + "/" + ggufs[0];
  if (ggufs.empty())
    throw Error("the snapshot '" + snap + "' of " + excerpt(name) + " holds neither config.json nor a .gguf file" +
                kListHint);
  throw Error("the snapshot '" + snap + "' of " + excerpt(name) + " holds several .gguf files (" + name_list(ggufs) +
              "), and a name chooses one model\n  HINT: pass the file's path: --model " + snap + "/" + ggufs[0]);
}

// --- LM Studio and llama.cpp: folders of .gguf files

void list_gguf_store(const std::string& source, const std::string& root, int depth, bool named_by_env,
                     std::vector<StoredModel>& out) {
  std::string why;
  const Kind k = kind_of(root, &why);
  if (k == Kind::Missing && !named_by_env) return;
  if (k != Kind::Dir) {
    out.push_back(
        store_problem(source, root, "the store is not a readable folder" + (why.empty() ? "" : " (" + why + ")")));
    return;
  }
  add_gguf_files(source, root, depth, "", out);
}

}  // namespace

std::string gguf_file_type_name(int64_t t) {
  // llama.cpp's llama_ftype (include/llama.h); the numbers it retired (4–6, 33–35) are left out.
  static const std::pair<int, const char*> kNames[] = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},      {3, "Q4_1"},    {7, "Q8_0"},     {8, "Q5_0"},
      {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"},   {12, "Q3_K_M"}, {13, "Q3_K_L"},  {14, "Q4_K_S"},
      {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},   {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"},
      {21, "Q2_K_S"}, {22, "IQ3_XS"}, {23, "IQ3_XXS"},  {24, "IQ1_S"},  {25, "IQ4_NL"},  {26, "IQ3_S"},
      {27, "IQ3_M"},  {28, "IQ2_S"},  {29, "IQ2_M"},    {30, "IQ4_XS"}, {31, "IQ1_M"},   {32, "BF16"},
      {36, "TQ1_0"},  {37, "TQ2_0"},  {38, "MXFP4_MOE"}};
  for (const auto& [n, name] : kNames)
    if (n == t) return name;
  return "type " + std::to_string(t);
}

std::vector<StoredModel> list_stored_models() {
  std::vector<StoredModel> out;
  // Each store alone: whatever escapes one (it should not) costs only that store.
  auto guarded = [&](const std::string& source, const std::string& root, auto&& list) {
    try {
      list();
    } catch (const std::exception& e) {
      out.push_back(store_problem(source, root, e.what()));
    }
  };
  guarded("ollama", ollama_root(), [&] { list_ollama(out); });
  guarded("hf", hf_root(), [&] { list_hf(out); });
  const std::string h = home();
  guarded("lmstudio", h + "/.lmstudio/models",
          [&] { list_gguf_store("lmstudio", h + "/.lmstudio/models", 3, false, out); });
  guarded("lmstudio", h + "/.cache/lm-studio/models",
          [&] { list_gguf_store("lmstudio", h + "/.cache/lm-studio/models", 3, false, out); });
  guarded("llamacpp", llamacpp_root(),
          [&] { list_gguf_store("llamacpp", llamacpp_root(), 1, !env("LLAMA_CACHE").empty(), out); });
  std::stable_sort(out.begin(), out.end(), [](const StoredModel& a, const StoredModel& b) {
    return a.source != b.source ? a.source < b.source : a.name < b.name;
  });
  return out;
}

bool is_store_name(const std::string& spec) { return spec.rfind("ollama:", 0) == 0 || spec.rfind("hf:", 0) == 0; }

std::string resolve_store_name(const std::string& spec) {
  if (spec.rfind("ollama:", 0) == 0) return resolve_ollama(spec);
  if (spec.rfind("hf:", 0) == 0) return resolve_hf(spec);
  throw Error("'" + excerpt(spec) + "' is not a model name (ollama:NAME[:TAG] or hf:ORG/NAME[@REVISION])",
              ErrorKind::Usage);
}

}  // namespace attnviz
