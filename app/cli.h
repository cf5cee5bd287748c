// attnviz-cli: the headless tool (dump, bench, info, random). Runs in-process so the tests
// can call it with their own streams.
#pragma once
#include <ostream>

namespace attnviz {

// Returns the process exit code: 0 ok, 1 bad data, 2 bad usage.
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace attnviz
