#include <iostream>

#include "app/cli.h"
#include "core/engine/threads.h"

int main(int argc, char** argv) {
  attnviz::reexec_with_passive_wait(argv);  // idle OpenMP threads sleep instead of spinning
  return attnviz::run_cli(argc, argv, std::cout, std::cerr);
}
