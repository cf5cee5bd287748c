#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "tests/fuzz/fuzz_target.h"

namespace attnviz::fuzz {

namespace {
std::map<std::string, TargetFn>& registry() {
  static std::map<std::string, TargetFn> r;
  return r;
}
}  // namespace

bool register_target(const char* name, TargetFn fn) {
  registry()[name] = fn;
  return true;
}

TargetFn find_target(const std::string& name) {
  const auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second;
}

std::string write_scratch_file(const char* name, const uint8_t* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return "";
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

const std::string& scratch_dir() {
  static const std::string dir = [] {
    const auto d = std::filesystem::temp_directory_path() / ("attnviz-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::temp_directory_path() / ("attnviz-fuzz-" + std::to_string(getpid())), ec);
    });
    return d.string();
  }();
  return dir;
}

}  // namespace attnviz::fuzz
