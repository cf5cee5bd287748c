// Fuzz targets: one function per parser, fed arbitrary bytes. A target returns normally for
// input it accepts or refuses with attnviz::Error; anything else (a crash, a sanitizer
// report, another exception escaping) is a bug. The same functions run under libFuzzer
// (fuzz_libfuzzer_main.cpp, clang) and as corpus replays in every build
// (fuzz_replay_main.cpp, any compiler).
//
// A new target: a file tests/fuzz/fuzz_NAME.cpp holding ATTNVIZ_FUZZ_TARGET(NAME) { ... },
// and NAME added to ATTNVIZ_FUZZ_TARGETS in tests/fuzz/CMakeLists.txt.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace attnviz::fuzz {

using TargetFn = void (*)(const uint8_t* data, size_t size);

// Registers `fn` under `name` (done by ATTNVIZ_FUZZ_TARGET at static initialisation).
bool register_target(const char* name, TargetFn fn);
// The target called `name`, or nullptr.
TargetFn find_target(const std::string& name);
// A scratch directory for this process (created once, removed at exit).
const std::string& scratch_dir();
// Writes the input as scratch_dir()/name and returns the path ("" when it cannot be written),
// for targets that open files.
std::string write_scratch_file(const char* name, const uint8_t* data, size_t size);

}  // namespace attnviz::fuzz

#define ATTNVIZ_FUZZ_TARGET(name)                                                             \
  static void attnviz_fuzz_##name(const uint8_t* data, size_t size);                          \
  static const bool attnviz_fuzz_registered_##name =                                          \
      ::attnviz::fuzz::register_target(#name, attnviz_fuzz_##name);                           \
  static void attnviz_fuzz_##name(const uint8_t* data, size_t size)
