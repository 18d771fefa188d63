// The command line of //bench:footprint. Options are --name=value or
// --name value. --model, --ranks, --stage, --precision, --optimizer and
// --offload take comma lists; the runs are their cross product (a sweep).
// Whole numbers accept 500000000 or 5e8; --device_memory accepts 80GB or
// 80GiB (GB = 1e9 bytes).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/footprint/experiment.h"

namespace zero::footprint {

struct Options {
  std::vector<std::string> models = {"zero-7.5b"};  // presets or .json files
  std::vector<int> ranks = {8, 64};
  std::vector<int> stages = {0, 1, 2, 3};
  std::vector<Precision> precisions = {Precision::kBF16};
  std::vector<OptimizerKind> optimizers = {OptimizerKind::kAdam};
  std::vector<Offload> offloads = {Offload::kNone};
  Knobs knobs;
  std::string json_path, csv_path, svg_path;  // empty: not written
  bool help = false;
};

// `args` without the program name. InvalidArgument with one line naming the
// option and what is wrong with it.
absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args);

// The --help text.
std::string Usage();

}  // namespace zero::footprint
