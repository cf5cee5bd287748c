#include "core/model/paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "core/error.h"
#include "core/limits.h"
#include "core/model/stores.h"
#include "core/tokenize/tokenizer.h"

namespace attnviz {

namespace fs = std::filesystem;

namespace {
// Folders add_data_dir gave, searched after $ATTNVIZ_DATA_DIR.
std::mutex& added_lock() {
  static std::mutex m;
  return m;
}
std::vector<std::string>& added_dirs() {
  static std::vector<std::string> dirs;
  return dirs;
}
}  // namespace

void add_data_dir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(added_lock());
  auto& dirs = added_dirs();
  if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
}

std::vector<std::string> data_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("ATTNVIZ_DATA_DIR"); env && *env) dirs.push_back(env);
  {
    std::lock_guard<std::mutex> lock(added_lock());
    dirs.insert(dirs.end(), added_dirs().begin(), added_dirs().end());
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back((exe.parent_path().parent_path() / ATTNVIZ_DATA_SUBDIR).string());
  dirs.push_back(ATTNVIZ_SOURCE_DIR);
  return dirs;
}

std::vector<std::string> builtin_models() {
  std::vector<std::string> names;
  for (const auto& d : data_dirs()) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(d) / "assets" / "models", ec))
      if (e.is_directory() && fs::exists(e.path() / "config.json")) {
        const std::string n = e.path().filename().string();
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
      }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string resolve_model_dir(const std::string& spec) {
  if (is_store_name(spec)) return resolve_store_name(spec);  // ollama:NAME[:TAG], hf:ORG/NAME[@REVISION]
  const std::string tag = "builtin:";
  if (spec.rfind(tag, 0) != 0) return spec;
  const std::string name = spec.substr(tag.size());
  // A built-in name is one folder name under assets/models: no separators, no "..".
  bool ok = !name.empty() && name.size() <= 64 && name[0] != '.';
  for (char ch : name)
    ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.');
  if (!ok)
    throw Error("'" + excerpt(spec) + "' is not a built-in model name (letters, digits, '-', '_' and '.' only)" +
                    "\n  HINT: attnviz-cli info --list shows the built-in models.",
                ErrorKind::Usage);
  std::string searched;
  for (const auto& d : data_dirs()) {
    const fs::path p = fs::path(d) / "assets" / "models" / name;
    if (fs::exists(p / "config.json")) return p.string();
    searched += "\n    " + p.string();
  }
  std::string have;
  for (const auto& n : builtin_models()) have += (have.empty() ? "" : ", ") + ("builtin:" + n);
  throw Error("unknown built-in model '" + excerpt(spec) + "'; looked in:" + searched +
              "\n  HINT: available: " + (have.empty() ? "none yet (generate one with attnviz-cli random)" : have));
}

std::string sample_text(const std::string& model_dir) {
  const std::string path = model_dir + "/sample.txt";
  std::error_code ec;
  if (model_dir.empty() || !fs::is_regular_file(path, ec)) return "";
  try {
    std::string text = read_regular_file(path, 64 * 1024, "sample.txt", false);
    utf8_validate(text);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    return text;
  } catch (const Error&) {
    return "";  // unreadable: the model simply has no sample
  }
}

}  // namespace attnviz
