#include "core/engine/threads.h"

#include <cstdlib>
#include <unistd.h>

namespace attnviz {

void reexec_with_passive_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT") || !argv || !argv[0]) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only when it failed: go on with the spinning default
  unsetenv("OMP_WAIT_POLICY");
}

std::string openmp_wait_policy() {
  if (const char* n = std::getenv("GOMP_SPINCOUNT")) return std::string("spincount=") + n;
  const char* p = std::getenv("OMP_WAIT_POLICY");
  if (!p) return "default";
  std::string s(p);
  for (char& ch : s) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
  return s;
}

}  // namespace attnviz
