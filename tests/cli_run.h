// Runs attnviz-cli in-process for the CLI tests: cli({"dump", ...}) gives the exit code,
// stdout and stderr (attnviz::run_cli_captured, see app/cli.h).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "app/cli.h"

namespace attnviz::test {

inline CliResult cli(std::vector<std::string> args) { return run_cli_captured(std::move(args)); }

}  // namespace attnviz::test
