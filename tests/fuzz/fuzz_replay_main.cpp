// Replays a corpus through one fuzz target: fuzz_replay TARGET PATH... (files, or folders
// whose files are all read). Exits 0 when every input was handled (accepted or refused with
// attnviz::Error), 1 on a bad command line. A crash or an escaping exception fails the run,
// naming the input.
#include <cstdio>
#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_target.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TARGET CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 1;
  }
  const auto fn = attnviz::fuzz::find_target(argv[1]);
  if (!fn) {
    std::fprintf(stderr, "no fuzz target '%s'\n", argv[1]);
    return 1;
  }
  std::vector<std::filesystem::path> files;
  for (int i = 2; i < argc; ++i) {
    const std::filesystem::path p = argv[i];
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "no inputs found\n");
    return 1;
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "%s (%zu bytes)\n", f.string().c_str(), bytes.size());
    try {
      fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "FAIL: %s: exception escaped the target: %s\n", f.string().c_str(), e.what());
      return 2;
    }
  }
  std::printf("%s: %zu inputs replayed\n", argv[1], files.size());
  return 0;
}
