// The footprint experiment: bazel run -c opt //footprint -- --help
// (see footprint/cli.h and footprint/README.md).
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "footprint/cli.h"

int main(int argc, char** argv) {
  // `bazel run` starts us in the runfiles: paths given on the command line
  // (--model=FILE.json, --svg=FILE, ...) are relative to where it was typed.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir != nullptr) {
    if (chdir(dir) != 0) std::cerr << "footprint: cannot enter " << dir << "\n";
  }
  const std::vector<std::string> args(argv + 1, argv + argc);
  return zero::footprint::RunFootprint(args, std::cout, std::cerr, isatty(STDERR_FILENO) == 1);
}
