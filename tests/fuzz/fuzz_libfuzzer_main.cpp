// libFuzzer entry for one target, chosen at compile time (ATTNVIZ_FUZZ_NAME).
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const attnviz::fuzz::TargetFn fn = [] {
    const auto f = attnviz::fuzz::find_target(ATTNVIZ_FUZZ_NAME);
    if (!f) {
      std::fprintf(stderr, "no fuzz target '%s'\n", ATTNVIZ_FUZZ_NAME);
      std::abort();
    }
    return f;
  }();
  fn(data, size);
  return 0;
}
