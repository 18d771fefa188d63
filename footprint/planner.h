// The planner (--plan): which ZeRO stage, offload, activation checkpointing
// and micro-batch size let one model train on --cards x --nodes cards of
// --device_memory. It runs the experiment for every combination (the same
// runs as a sweep, with the topology settings given: hierarchical
// collectives, hpZ, quantized weights and gradients) and lists those that
// fit, cheapest first: bytes each rank sends across nodes per step, then
// all it sends, then host memory per node, then recomputation, then the
// larger micro-batch. Pure functions over the sweep's rows.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "footprint/options.h"
#include "footprint/row.h"

namespace zero::footprint {

// The sweep the planner runs: stages 0-3, offload none/optimizer/parameters,
// checkpointing none and full (and selective with eager attention and
// fused kernels; transformers has none), for the --kernels and
// --attention given (one of each),
// micro-batches as given or 1, 2, 4, 8; ranks = cards x nodes; the rest as
// given. InvalidArgument, naming the option, when one it chooses itself
// (--ranks, --stage, --offload, --checkpointing) is given, or when --model,
// --seq, --precision, --optimizer, --kernels or --attention has more than
// one value.
absl::StatusOr<Options> PlanSweep(Options options);

struct PlanLine {
  const Row* row = nullptr;
  double host_per_node = 0;  // pinned host bytes x cards
  double recompute = 0;      // extra forward FLOPs over the step's FLOPs
  bool fits = false;         // the card (peak reserved) and the node's host memory
};

// Fitting lines first, by cost; then the others by peak.
std::vector<PlanLine> RankPlan(const std::vector<Row>& rows, const Options& options);

// The plan as text: the configurations that fit (or, when none does, the
// closest), with a line on what was tried and how long it took.
std::string FormatPlan(const std::vector<PlanLine>& lines, const Options& options,
                       double seconds);

}  // namespace zero::footprint
