// What `bazel run //footprint -- ARGS` does, as a function tests can
// call: parses ARGS, loads the models, runs the sweep, prints the table on
// `out` (and writes --json/--csv/--svg), progress on `err`. Any bad input
// (unknown option or preset, a malformed model file, a value out of range)
// or a configuration the engine rejects: one line on `err` saying what and
// where, and exit status 2. An output file that cannot be written: 1.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace zero::footprint {

int RunFootprint(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                 bool err_is_tty = false);

}  // namespace zero::footprint
