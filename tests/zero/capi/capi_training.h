// Drives the test models through the C ABI (zero_engine.h) exactly as
// tests/zero/training.h drives the C++ engine: one thread per rank over the
// local backend, or over the caller's collectives (zero_comm_create) that
// forward to a local group, so the two can be compared bit for bit.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tests/model/model.h"
#include "tests/zero/training.h"
#include "zero/capi/zero_engine.h"

namespace zero::testing_model {

struct CapiRun {
  TrainingRun run;        // world, steps, seed, config (its optimizer comes below)
  std::string optimizer;  // the "optimizer" object of the config JSON
  std::vector<int> groups;  // per parameter; empty: all in group 0
  bool over_callbacks = false;
  // Called on each rank after create and initial parameters (e.g. set_lr).
  std::function<int(int rank, zero_engine* engine)> before_training;
  // Called on each rank after the last backward of each step, before
  // zero_engine_step; nonzero stops that rank's training with the C error.
  std::function<int(int rank, zero_engine* engine)> before_step;
};

struct CapiResult {
  int code = 0;
  std::string error;  // zero_engine_last_error() when code != 0
  ParamSet params;    // final parameters, widened to fp32
};

// The engine config as the C ABI's JSON, with `optimizer` as its optimizer.
std::string ConfigJson(const EngineConfig& config, const std::string& optimizer);

std::vector<CapiResult> TrainWithCapi(const Model& model, const CapiRun& run);

}  // namespace zero::testing_model
