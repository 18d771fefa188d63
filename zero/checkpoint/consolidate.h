// One consolidated file of a checkpoint's fp32 master weights, in the
// safetensors format (what Hugging Face and torch tooling load): an 8-byte
// little-endian header length, a JSON header
//   {"__metadata__": {"format": "pt", "source": "zero-checkpoint", "steps": "120"},
//    "fc1.weight": {"dtype": "F32", "shape": [512], "data_offsets": [0, 2048]}, ...}
// padded with spaces to a multiple of 8 bytes, then the tensors back to back
// in registration order. Shapes are flat ([numel]): the engine knows element
// counts, not shapes.
//
// Works offline on the files alone, whatever world size wrote them, holding
// one chunk (SaveOptions::chunk_elements) in memory at a time, and verifies
// every chunk it copies; the output appears atomically or not at all.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace zero::checkpoint {

struct ConsolidateSummary {
  int params = 0;
  uint64_t elements = 0;
  int64_t steps = 0;
  std::string checkpoint;  // the step folder read
};

// `checkpoint`: a root with `latest` or a step folder.
absl::StatusOr<ConsolidateSummary> ConsolidateToSafetensors(const std::string& checkpoint,
                                                            const std::string& output);

}  // namespace zero::checkpoint
