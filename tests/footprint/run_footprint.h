// Runs the footprint command line in-process and keeps what it printed, for
// tests that check output and exit status.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "footprint/cli.h"

namespace zero::footprint {

struct Result {
  int code;
  std::string out, err;
};

inline Result Footprint(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunFootprint(args, out, err);
  return {code, out.str(), err.str()};
}

}  // namespace zero::footprint
