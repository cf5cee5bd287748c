#include "core/model/stores.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
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
// And at most this many entries a store, all its folders together: a tree of many folders
// each under the cap (100 folders of 1,000 tags) is bounded as well.
constexpr size_t kMaxStoreEntries = 20000;
// Largest Ollama manifest read (real ones are about a kilobyte): thousands of tags of huge
// manifests would otherwise cost gigabytes of reading.
constexpr int64_t kMaxManifestBytes = int64_t{1} << 20;
// How many names an error message lists before "…".
constexpr size_t kMaxNamesShown = 20;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
std::string home() { return env("HOME"); }

// What a path is, following symlinks; `why` says what is wrong for Other, Loop and Unreadable.
enum class Kind { Missing, File, Dir, Other, Loop, Unreadable };
Kind kind_of(const std::string& path, std::string* why = nullptr) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISREG(st.st_mode)) return Kind::File;
    if (S_ISDIR(st.st_mode)) return Kind::Dir;
    if (why)
      *why = S_ISFIFO(st.st_mode)                         ? "a FIFO (named pipe)"
             : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
             : S_ISSOCK(st.st_mode)                       ? "a socket"
                                                          : "not a regular file";
    return Kind::Other;
  }
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

// The names in a directory, sorted, without "." and ".." (at most kMaxDirEntries; *cut, when
// given, says whether there were more). Throws attnviz::Error naming `what` when it cannot be read.
std::vector<std::string> list_dir(const std::string& dir, const std::string& what, bool* cut = nullptr) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    const int e = errno;
    throw Error("cannot read " + what + " '" + excerpt(dir, kPathExcerptBytes) +
                "': " + (e == ELOOP ? std::string("a symlink loop") : std::strerror(e)));
  }
  std::vector<std::string> names;
  if (cut) *cut = false;
  while (const dirent* ent = ::readdir(d)) {
    const std::string n = ent->d_name;
    if (n == "." || n == "..") continue;
    if (names.size() == kMaxDirEntries) {
      if (cut) *cut = true;
      break;
    }
    names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// `path` with every symlink resolved; "" when it cannot be (missing, a loop, unreadable).
std::string real_path(const std::string& path) {
  char* r = ::realpath(path.c_str(), nullptr);
  if (!r) return "";
  std::string s = r;
  std::free(r);
  return s;
}

// Whether the resolved path `real` lies in (or is) the resolved folder `real_root`.
bool within(const std::string& real, const std::string& real_root) {
  if (real.empty() || real_root.empty()) return false;
  if (real_root == "/") return true;
  return real.compare(0, real_root.size(), real_root) == 0 &&
         (real.size() == real_root.size() || real[real_root.size()] == '/');
}

// Whether `path` is a symlink (itself or through a folder on its way) that resolves to a
// place outside the store whose resolved root is `real_root`. A path that does not resolve
// (missing, a loop) is not "outside": the callers report it as what it is.
bool leads_outside(const std::string& path, const std::string& real_root) {
  const std::string r = real_path(path);
  return !r.empty() && !within(r, real_root);
}

constexpr const char* kOutside = "a symlink leading outside the store (not followed)";

// One store being listed: where it really is, the folders already walked (by device and
// inode, so that a folder reached again through a symlink is walked once and a symlink loop
// ends), how many more entries the whole store may cost, and the GGUF files already read
// (a blob many tags name is read once). Problems become "(store)" entries in `out`.
struct Scope {
  std::string source, root, real_root;
  std::vector<StoredModel>& out;
  std::map<std::pair<dev_t, ino_t>, std::string> folders;
  std::map<std::pair<dev_t, ino_t>, StoredModel> described;
  size_t left = kMaxStoreEntries;
  bool stopped = false;

  Scope(std::string src, std::string r, std::vector<StoredModel>& o)
      : source(std::move(src)), root(std::move(r)), real_root(real_path(root)), out(o) {}
  void problem(const std::string& path, const std::string& reason) const;
  // Takes one entry from the store's budget; false once it is spent (noted once).
  bool spend() {
    if (left > 0) {
      --left;
      return true;
    }
    if (!stopped)
      problem(root, "the store holds more than " + std::to_string(kMaxStoreEntries) +
                        " entries; the listing stops there (the rest are not shown)");
    stopped = true;
    return false;
  }
  // Records the folder `dir` as walked; false (with a problem entry) when it was already.
  bool first_visit(const std::string& dir) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return true;  // list_dir says what is wrong
    const auto [it, fresh] = folders.emplace(std::make_pair(st.st_dev, st.st_ino), dir);
    if (!fresh)
      problem(dir, "the same folder as '" + excerpt(it->second, kPathExcerptBytes) +
                       "' (a symlink back to it; listed once)");
    return fresh;
  }
  // A note when list_dir cut the folder `dir` at kMaxDirEntries.
  void note_cut(const std::string& dir, bool cut) const {
    if (cut)
      problem(dir, "the folder holds more than " + std::to_string(kMaxDirEntries) + " entries; only " +
                       std::to_string(kMaxDirEntries) + " are listed");
  }
};

// Visits every entry that is not a folder exactly `depth` levels below `dir` (`parts`: the
// names on the way, the entry's last; `outside`: the entry is a symlink leading out of the
// store, to be listed as not opening), in name order, descending only into folders inside the
// store, each folder once. A folder that cannot be read, a symlink loop and a folder symlink
// leading out of the store become problem entries: one bad folder costs only what it holds.
using Visit = std::function<void(const std::vector<std::string>& parts, const std::string& path, bool outside)>;
void walk(Scope& s, const std::string& dir, int depth, const Visit& visit, std::vector<std::string>& parts) {
  if (!s.first_visit(dir)) return;
  std::vector<std::string> names;
  bool cut = false;
  try {
    names = list_dir(dir, "the folder", &cut);
  } catch (const Error& e) {
    s.problem(dir, e.what());
    return;
  }
  s.note_cut(dir, cut);
  for (const auto& n : names) {
    if (!s.spend()) return;
    const std::string path = dir + "/" + n;
    struct stat lst {};
    const bool link = ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode);
    const bool outside = link && leads_outside(path, s.real_root);
    std::string why;
    const Kind k = kind_of(path, &why);
    parts.push_back(n);
    if (depth > 1) {
      if (k == Kind::Dir && outside)
        s.problem(path, kOutside);
      else if (k == Kind::Dir)
        walk(s, path, depth - 1, visit, parts);
      else if (k == Kind::Loop || k == Kind::Unreadable)
        s.problem(path, why);
    } else if (k != Kind::Dir) {
      visit(parts, path, outside);
    }
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

// An unreadable store (or a store root an environment variable names that is not there).
StoredModel store_problem(const std::string& source, const std::string& root, const std::string& reason) {
  StoredModel e = entry(source, "(store)", root);
  e.reason = reason;
  return e;
}

void Scope::problem(const std::string& path, const std::string& reason) const {
  out.push_back(store_problem(source, path, reason));
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
// metadata; never throws. A FIFO or a device is never opened (nothing blocks on it).
void describe_gguf_file(StoredModel& e) {
  std::string why;
  const Kind k = kind_of(e.path, &why);
  if (k != Kind::File) {
    e.reason = k == Kind::Missing ? "the file is missing" + (why.empty() ? "" : " (" + why + ")")
               : k == Kind::Dir   ? "a directory, not a GGUF file"
               : k == Kind::Other ? why + ", not a regular file"
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

// describe_gguf_file, once a file: a file seen before (the same device and inode, as when
// many tags name one blob) gets the description found then.
void describe_gguf(Scope& s, StoredModel& e) {
  struct stat st {};
  if (::stat(e.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return describe_gguf_file(e);
  const auto key = std::make_pair(st.st_dev, st.st_ino);
  if (const auto it = s.described.find(key); it != s.described.end()) {
    e.architecture = it->second.architecture;
    e.file_type = it->second.file_type;
    e.bytes = it->second.bytes;
    e.opens = it->second.opens;
    e.reason = it->second.reason;
    return;
  }
  describe_gguf_file(e);
  s.described.emplace(key, e);
}

// Every *.gguf `depth` levels below `dir` as an entry named by its path under `dir`,
// prefixed with `prefix` ("" for the stores, "ORG/NAME/" in a Hugging Face snapshot).
void add_gguf_files(Scope& s, const std::string& dir, int depth, const std::string& prefix) {
  std::vector<std::string> parts;
  walk(
      s, dir, depth,
      [&](const std::vector<std::string>& p, const std::string& path, bool outside) {
        if (!ends_with(p.back(), ".gguf")) return;
        std::string name = prefix;
        for (size_t i = 0; i < p.size(); ++i) name += (i ? "/" : "") + p[i];
        StoredModel e = entry(s.source, name, path);
        if (outside)
          e.reason = kOutside;
        else
          describe_gguf(s, e);
        s.out.push_back(std::move(e));
      },
      parts);
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

// The blob of the manifest's model layer (blobs/sha256-HEX under `root`, whose resolved path
// is `real_root`). Throws when the manifest is not JSON, has no model layer, or names a blob
// that is not there, is not a regular file or is a symlink leading out of the store.
std::string ollama_blob(const std::string& root, const std::string& real_root, const std::string& manifest) {
  const std::string hint = "\n  HINT: pull the model again with ollama (the manifest is damaged).";
  const nlohmann::json j = read_json_file(manifest, "Ollama manifest", hint, kMaxManifestBytes);
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
    const std::string shown = "its model blob '" + excerpt(blob, kPathExcerptBytes) + "'";
    std::string why;
    const Kind k = kind_of(blob, &why);
    if (k == Kind::Missing) throw Error(where + shown + " is missing" + hint);
    if (k != Kind::File)
      throw Error(where + shown + " is not a regular file" + (why.empty() ? "" : " (" + why + ")") + hint);
    if (leads_outside(blob, real_root)) throw Error(where + shown + " is " + kOutside + hint);
    return blob;
  }
  throw Error(where + "no layer of mediaType " + kOllamaModelType + " (the model's weights)" + hint);
}

// Why --model would refuse the name of the manifest manifests/REGISTRY/NAMESPACE/NAME/TAG
// (`p`), "" when it takes it: every part must be a safe_component.
std::string ollama_name_problem(const std::vector<std::string>& p) {
  for (const auto& part : p)
    if (!safe_component(part))
      return "its name part '" + excerpt(part) +
             "' is not one --model takes (letters, digits, '.', '_', '-', not starting with '.')";
  return "";
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
  Scope s("ollama", root, out);
  if (leads_outside(manifests, s.real_root)) return s.problem(manifests, kOutside);
  // manifests/REGISTRY/NAMESPACE/NAME/TAG
  std::vector<std::string> parts;
  walk(
      s, manifests, 4,
      [&](const std::vector<std::string>& p, const std::string& manifest, bool outside) {
        StoredModel e = entry("ollama", ollama_name(p[0], p[1], p[2], p[3]), manifest);
        e.reason = outside ? kOutside : ollama_name_problem(p);
        if (e.reason.empty()) {
          try {
            e.path = ollama_blob(root, s.real_root, manifest);
            describe_gguf(s, e);
          } catch (const Error& err) {
            e.reason = short_reason(err, manifest);
          }
        }
        out.push_back(std::move(e));
      },
      parts);
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
  const std::string real_root = real_path(root);
  if (leads_outside(manifest, real_root))
    throw Error("Ollama manifest '" + excerpt(manifest, kPathExcerptBytes) + "' is " + kOutside +
                "\n  HINT: keep the store's manifests and blobs inside it (OLLAMA_MODELS names the store).");
  const std::string blob = ollama_blob(root, real_root, manifest);
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

// Whether `name` ("ORG/NAME" or "NAME") is one hf: takes: each part a safe_component.
bool hf_name_ok(const std::string& name) {
  const size_t slash = name.find('/');
  return safe_component(name.substr(0, slash)) &&
         (slash == std::string::npos || safe_component(name.substr(slash + 1)));
}

// A commit hash as the cache names snapshots: 40 hexadecimal digits (SHA-1), or 64 (SHA-256).
bool is_commit_hash(const std::string& s) {
  return (s.size() == 40 || s.size() == 64) &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// The snapshot folder of `rev` in a repository folder: refs/REV holds a commit, or REV is a
// commit under snapshots/. Throws naming both and what is there. A ref or snapshot that is a
// symlink leading out of the cache (resolved root `real_root`) is refused, and a ref's bytes
// are never quoted unless they are a commit hash (40 or 64 hexadecimal digits).
std::string hf_revision_dir(const std::string& repo, const std::string& real_root, const std::string& name,
                            const std::string& rev) {
  std::string commit;
  std::string why;
  const std::string ref = repo + "/refs/" + rev;
  const std::string shown_ref = "Hugging Face ref '" + excerpt(ref, kPathExcerptBytes) + "'";
  const std::string again = "\n  HINT: download the model again (huggingface-cli download " + excerpt(name) + ").";
  const Kind k = kind_of(ref, &why);
  if (k != Kind::Missing && leads_outside(ref, real_root)) throw Error(shown_ref + " is " + kOutside + again);
  if (k == Kind::File) {
    commit = read_regular_file(ref, 256, "Hugging Face ref");
    while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
    if (!safe_component(commit))
      throw Error(shown_ref + " does not hold a commit (letters, digits, '.', '_', '-')" + again);
  } else if (k == Kind::Loop || k == Kind::Unreadable || k == Kind::Other) {
    throw Error(shown_ref + ": " + why + again);
  } else {
    commit = rev;
  }
  const std::string snap = repo + "/snapshots/" + commit;
  const Kind s = kind_of(snap, &why);
  if (s == Kind::Dir) {
    if (leads_outside(snap, real_root))
      throw Error("Hugging Face snapshot '" + excerpt(snap, kPathExcerptBytes) + "' is " + kOutside + again);
    return snap;
  }
  if (s == Kind::Loop || s == Kind::Unreadable) throw Error("Hugging Face snapshot '" + snap + "': " + why);
  std::vector<std::string> refs, snaps;
  if (kind_of(repo + "/refs") == Kind::Dir) refs = list_dir(repo + "/refs", "the Hugging Face cache");
  if (kind_of(repo + "/snapshots") == Kind::Dir) snaps = list_dir(repo + "/snapshots", "the Hugging Face cache");
  throw Error("Hugging Face model " + excerpt(name) + " has no revision '" + excerpt(rev) + "' in '" + repo + "' (" +
              (k == Kind::File ? "refs/" + rev + " names " + (is_commit_hash(commit) ? "commit " + commit : "a commit") +
                                     ", which has no snapshot"
                               : "no refs/" + rev + " and no snapshots/" + excerpt(rev)) +
              "); refs: " + name_list(refs) + "; snapshots: " + name_list(snaps) + kListHint);
}

// The first entry of the folder `dir` that is a symlink leading out of the store (resolved
// root `real_root`): what the loader would read from elsewhere. "" when there is none.
std::string link_leading_outside(const std::string& dir, const std::string& real_root) {
  for (const auto& n : list_dir(dir, "the snapshot")) {
    struct stat lst {};
    const std::string path = dir + "/" + n;
    if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode) && leads_outside(path, real_root)) return n;
  }
  return "";
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
void describe_model_dir(StoredModel& e, const std::string& real_root) {
  const std::string cfg = e.path + "/config.json";
  try {
    if (const std::string out = link_leading_outside(e.path, real_root); !out.empty()) {
      e.reason = excerpt(out) + " is " + kOutside;
      return;
    }
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
void add_hf_snapshot(Scope& s, const std::string& name, const std::string& snap) {
  std::string why;
  const Kind k = kind_of(snap + "/config.json", &why);
  if (k == Kind::Loop || k == Kind::Unreadable) {
    StoredModel e = entry("hf", name, snap);
    e.reason = "config.json: " + why;
    s.out.push_back(std::move(e));
    return;
  }
  if (k == Kind::File) {
    StoredModel e = entry("hf", name, snap);
    describe_model_dir(e, s.real_root);
    s.out.push_back(std::move(e));
    return;
  }
  const size_t before = s.out.size();
  add_gguf_files(s, snap, 1, name + "/");
  if (s.out.size() == before) {
    StoredModel e = entry("hf", name, snap);
    e.reason = "neither config.json nor a .gguf file" + (why.empty() ? "" : " (config.json is " + why + ")");
    s.out.push_back(std::move(e));
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
  Scope s("hf", root, out);
  try {
    s.first_visit(root);
    bool cut = false;
    const std::vector<std::string> folders = list_dir(root, "the Hugging Face cache", &cut);
    s.note_cut(root, cut);
    for (const auto& folder : folders) {
      const std::string name = hf_repo_name(folder);
      if (name.empty()) continue;  // datasets--, spaces--, .locks
      if (!s.spend()) return;
      StoredModel e = entry("hf", name, root + "/" + folder);
      if (!hf_name_ok(name)) {
        e.reason = "its name " + excerpt(name) +
                   " is not one --model takes (hf:ORG/NAME: letters, digits, '.', '_', '-', not starting with '.')";
      } else if (leads_outside(e.path, s.real_root)) {
        e.reason = kOutside;
      } else if (kind_of(e.path) == Kind::Dir && !s.first_visit(e.path)) {
        continue;  // the same repository as one listed (first_visit noted it)
      } else {
        try {
          add_hf_snapshot(s, name, hf_revision_dir(e.path, s.real_root, name, "main"));
          continue;
        } catch (const Error& err) {
          e.reason = short_reason(err, e.path);
        }
      }
      out.push_back(std::move(e));
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
  bool ok = hf_name_ok(name);
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
  const std::string real_root = real_path(root);
  if (leads_outside(repo, real_root))
    throw Error("the Hugging Face folder '" + excerpt(repo, kPathExcerptBytes) + "' is " + kOutside +
                "\n  HINT: keep the cache's repositories inside it (HF_HUB_CACHE or HF_HOME name the cache).");
  const std::string snap = hf_revision_dir(repo, real_root, name, rev);
  if (const std::string out = link_leading_outside(snap, real_root); !out.empty())
    throw Error("the snapshot '" + excerpt(snap, kPathExcerptBytes) + "' of " + excerpt(name) + ": " + excerpt(out) +
                " is " + kOutside + "\n  HINT: download the model again (huggingface-cli download " + excerpt(name) +
                ").");
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
  Scope s(source, root, out);
  add_gguf_files(s, root, depth, "");
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

std::string stored_model_spec(const StoredModel& m) {
  if (m.source == "ollama") return "ollama:" + m.name;
  // A snapshot's model directory is named ORG/NAME; its GGUF files ORG/NAME/FILE.gguf, which
  // no hf: name points at.
  const size_t slash = m.name.find('/');
  if (m.source == "hf" && slash != std::string::npos && slash == m.name.rfind('/')) return "hf:" + m.name;
  return m.path;
}

bool is_store_name(const std::string& spec) { return spec.rfind("ollama:", 0) == 0 || spec.rfind("hf:", 0) == 0; }

std::string resolve_store_name(const std::string& spec) {
  if (spec.rfind("ollama:", 0) == 0) return resolve_ollama(spec);
  if (spec.rfind("hf:", 0) == 0) return resolve_hf(spec);
  throw Error("'" + excerpt(spec) + "' is not a model name (ollama:NAME[:TAG] or hf:ORG/NAME[@REVISION])",
              ErrorKind::Usage);
}

}  // namespace attnviz
