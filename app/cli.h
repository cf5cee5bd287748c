// attnviz-cli: the headless tool. Subcommands (one file each, app/cmd_<name>.cpp): info,
// dump, bench, random, export, train, eval, heads, tokenize, lens, patch, models. Runs
// in-process so the tests can call it with their own streams; cli_main.cpp only forwards
// argv and the standard streams.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace attnviz {

// Returns the process exit code: 0 ok, 1 bad data, 2 bad usage.
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// run_cli with argv = {"attnviz-cli", args...}, both streams captured (tests, tools).
struct CliResult {
  int code;
  std::string out, err;
};
CliResult run_cli_captured(std::vector<std::string> args);

}  // namespace attnviz
