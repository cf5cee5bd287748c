#include "core/model/paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"

namespace attnviz {

namespace fs = std::filesystem;

std::vector<std::string> data_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("ATTNVIZ_DATA_DIR"); env && *env) dirs.push_back(env);
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
  const std::string tag = "builtin:";
  if (spec.rfind(tag, 0) != 0) return spec;
  const std::string name = spec.substr(tag.size());
  std::string searched;
  for (const auto& d : data_dirs()) {
    const fs::path p = fs::path(d) / "assets" / "models" / name;
    if (fs::exists(p / "config.json")) return p.string();
    searched += "\n    " + p.string();
  }
  std::string have;
  for (const auto& n : builtin_models()) have += (have.empty() ? "" : ", ") + ("builtin:" + n);
  throw Error("unknown built-in model '" + spec + "'; looked in:" + searched +
              "\n  HINT: available: " + (have.empty() ? "none yet (generate one with attnviz-cli random)" : have));
}

}  // namespace attnviz
