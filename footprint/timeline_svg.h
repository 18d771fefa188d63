// A picture of one training step (--timeline=FILE.svg), like PyTorch's
// memory viewer for a job that never ran: the pool's allocated bytes by tag
// (parameters, gradients, optimizer state, communication, gathered,
// activations, other) as stacked areas over the step's pool events, the
// forward, backward and optimizer phases marked, and the peak marked with
// its value and what it is made of. Self-contained SVG 1.1; opens in a
// browser. Pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "footprint/experiment.h"

namespace zero::footprint {

// The allocated bytes per tag after each of the step's allocations and
// frees (other events are skipped), from `timeline.start`.
struct TagSeries {
  std::vector<std::array<size_t, kNumTags>> bytes;  // one per allocation or free
  std::vector<size_t> event;                        // its index in timeline.events
};
TagSeries Replay(const StepTimeline& timeline);

// `title` names the run (Row::Label); it is escaped for XML.
std::string TimelineSvg(const StepTimeline& timeline, const std::string& title);

}  // namespace zero::footprint
