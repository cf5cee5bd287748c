#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "app/cli.h"
#include "core/engine/threads.h"

int main(int argc, char** argv) {
  attnviz::reexec_with_passive_wait(argv);  // idle OpenMP threads sleep instead of spinning
  // A write past the file-size limit (ulimit -f, RLIMIT_FSIZE) would kill the process
  // with SIGXFSZ and leave a temporary file behind; ignored, the write fails with EFBIG
  // and the writer's error path removes it and says which file could not be written.
  std::signal(SIGXFSZ, SIG_IGN);
  // Tests only (tests/dump_reproducible.sh): ATTNVIZ_TEST_HEAP_SKEW=N takes N bytes of heap
  // first and keeps them, so every later block lands elsewhere than in a plain run. The
  // numbers must not change (core/aligned.h).
  const char* skew_env = std::getenv("ATTNVIZ_TEST_HEAP_SKEW");
  const size_t skew_bytes = skew_env ? static_cast<size_t>(std::max(0L, std::atol(skew_env))) : 0;
  void* volatile skew = skew_bytes ? std::malloc(skew_bytes) : nullptr;
  if (skew) std::memset(skew, 1, skew_bytes);
  const int rc = attnviz::run_cli(argc, argv, std::cout, std::cerr);
  // What went to standard output (tokenize --json > F, for one) must have arrived.
  errno = 0;
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;  // retries what is buffered: errno says why it fails
  const int err = errno;
  if (!std::cout || !flushed || std::ferror(stdout)) {
    std::fprintf(stderr, "error: cannot write the output to standard output: %s\n",
                 err ? std::strerror(err) : "write failed");
    if (err == EFBIG)
      std::fprintf(stderr, "  HINT: the output is larger than the file-size limit allows (ulimit -f).\n");
    return rc ? rc : 1;
  }
  std::free(skew);
  return rc;
}
