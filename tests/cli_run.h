// Runs attnviz-cli in-process: the arguments after the program name, stdout, stderr and
// the exit code, for the CLI tests.
#pragma once
#include <sstream>
#include <string>
#include <vector>

#include "app/cli.h"

namespace attnviz::test {

struct CliResult {
  int code;
  std::string out, err;
};

inline CliResult cli(std::vector<std::string> args) {
  args.insert(args.begin(), "attnviz-cli");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

}  // namespace attnviz::test
