// The command line of //footprint, as abseil flags (ABSL_FLAG in
// options.cc, so --help and --helpfull list them in abseil's format).
// Options are --name=value or --name value. --model, --ranks, --stage,
// --precision, --optimizer, --offload, --seq, --micro_batch, --kernels,
// --attention and --checkpointing take comma lists; the runs are their
// cross product (a sweep); --backend is one value for all. Whole numbers
// accept 500000000 or 5e8; --device_memory accepts 80GB or 80GiB (GB = 1e9
// bytes). --plan asks the planner (planner.h) instead of a sweep.
//
// ParseOptions reads only `args`: it starts every flag of this program from
// its default and leaves them at their defaults, so a program (or a test)
// may call it many times; not from two threads at once (flags are global).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "footprint/experiment.h"

namespace zero::footprint {

struct Options {
  // These defaults are the flags' defaults (and what --help shows).
  std::vector<std::string> models = {"zero-7.5b"};  // presets or .json files
  std::vector<int> ranks = {8, 64};
  std::vector<int> stages = {0, 1, 2, 3};
  std::vector<Precision> precisions = {Precision::kBF16};
  std::vector<OptimizerKind> optimizers = {OptimizerKind::kAdam};
  std::vector<Offload> offloads = {Offload::kNone};
  // Activations of one micro-batch; seq 0: none.
  std::vector<uint64_t> seqs = {1024};
  std::vector<uint64_t> micro_batches = {1};
  // What a user who loads a model with AutoModelForCausalLM and trains it
  // with the Trainer runs: transformers' code, its default sdpa attention.
  std::vector<Kernels> kernels = {Kernels::kTransformers};
  std::vector<Attention> attentions = {Attention::kSdpa};
  std::vector<Checkpointing> checkpointings = {Checkpointing::kNone};
  Backend backend = Backend::kGpu;  // one for the whole sweep
  Knobs knobs;
  std::string json_path, csv_path, svg_path;  // empty: not written
  std::string timeline_path;                  // one run's step as an SVG; empty: none
  // The planner: --cards per node on --nodes nodes, each node with
  // --host_memory; --device_memory per card.
  bool plan = false;
  int cards = 8, nodes = 1;
  size_t host_memory = 2'000'000'000'000;
  std::set<std::string> given;  // the options on the command line, by name
  // --help or -h: this program's flags; --helpfull: every flag linked in;
  // --help=WORD: this program's flags whose name or help holds WORD.
  enum class Help { kNone, kShort, kFull } help = Help::kNone;
  std::string help_match;
};

// `args` without the program name. InvalidArgument with one line naming the
// option and what is wrong with it.
absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args);

// The --help text (kShort; with `match`, --help=WORD) or the --helpfull
// text (kFull), in abseil's format.
std::string Usage(Options::Help which = Options::Help::kShort, const std::string& match = "");

}  // namespace zero::footprint
