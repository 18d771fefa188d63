// What the checkpoint fuzzer and its seed writer share: the model the seeds
// were saved from (loads check it), and where an archive's files go.
#pragma once

#include <memory>
#include <string>

#include "tests/fuzz/file_archive.h"
#include "tests/model/model.h"
#include "tests/zero/training.h"

namespace zero::fuzz {

inline constexpr char kStepFolder[] = "step-2";

std::unique_ptr<testing_model::Model> SeedModel();
testing_model::TrainingRun SeedRun(int world);

// `root`/latest (the file named "latest") and `root`/step-2/ (the others).
void WriteCheckpoint(const std::string& root, const Archive& archive);

}  // namespace zero::fuzz
