// The parameter side of one rank's engine. At stage 3 parameters live as
// this rank's pieces: Fetch gathers a module's units on demand and
// prefetches along the order recorded in the first step (FetchPlan),
// Release frees them unless they are persistent (small units kept whole)
// or reused soon. Below stage 3 parameters are whole and Fetch / Release
// check their pairing and wait for the all-gather after the last step.
// Streams: gathers run on ctx.comm_stream; a consumer stream waits on the
// unit's event (Fetch, AwaitWhole); buffers are freed on ctx.stream after
// the consumer's use (Release orders ctx.stream after the consumer).
// Driven by the engine's thread; errors are returned, the engine aborts
// the group.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "zero/buffer.h"
#include "zero/internal/fetch_plan.h"
#include "zero/internal/model_states.h"
#include "zero/internal/rank_context.h"

namespace zero {

class ParameterGatherer {
 public:
  // Maps modules to units; at stage 3 allocates the persistent units
  // (zeros until SetParam fills them).
  static absl::StatusOr<std::unique_ptr<ParameterGatherer>> Create(const RankContext& ctx,
                                                                   ModelStates& states);

  // Calls nest: a module stays fetched until every Fetch has its Release.
  // `consumer` is the stream that reads the parameters (ctx.stream usually).
  absl::Status Fetch(int module, Stream* consumer);
  absl::Status Release(int module, Stream* consumer);
  // Where a unit's whole values are now, or null (stage 3, not gathered).
  char* Whole(int unit) const;
  // Makes `consumer` wait until Whole(unit) holds the last gather's values.
  absl::Status AwaitWhole(int unit, Stream* consumer) const;
  // The host as the consumer: blocks until every unit of `module` holds its
  // values (its gather's event; ctx.stream where no event marks them).
  absl::Status AwaitFetchedOnHost(int module) const;
  // Below stage 3, after the update of this rank's piece on ctx.stream:
  // all-gathers the unit's pieces into the whole parameters.
  absl::Status Publish(int unit);
  // Elements gathered now beyond this rank's own pieces (stage 3).
  size_t live_elements() const { return live_elements_; }

  // Collective, after the update (stage 3): the first step's order becomes
  // the prefetch plan once every rank agrees on it; stale gathered copies
  // go and persistent units are gathered afresh. The caller has checked
  // NothingFetched before the update.
  absl::Status FinishStep();
  // FailedPrecondition naming `call` while a module is fetched (stage 3:
  // its gathered buffer is in use).
  absl::Status NothingFetched(std::string_view call) const;
  // Collective: drops stale gathered copies, renews the persistent ones.
  absl::Status Refresh();

 private:
  struct UnitState {
    Buffer gathered;  // the whole unit, while fetched
    bool persistent = false;
    // On ctx.comm_stream after the unit's last gather (or Publish).
    std::shared_ptr<Event> ready;
    // hpZ: this rank's part of the node's partition of the unit, valid from
    // the unit's first gather in a step until the update.
    Buffer secondary;
    bool secondary_valid = false;
  };
  ParameterGatherer(const RankContext& ctx, ModelStates& states);
  absl::Status GatherUnit(int unit);
  // The unit's gather from this rank's piece (quantized when configured).
  absl::Status GatherPieces(int unit, const void* piece, void* whole);
  // hpZ: the gather inside the node from the secondary pieces, or keeping
  // them after a gather from the pieces.
  absl::Status GatherSecondary(int unit, void* whole);
  absl::Status KeepSecondary(int unit, const char* whole);
  absl::Status Prefetch();
  absl::Status Drop(int unit);
  absl::Status RecordReady(int unit);

  const RankContext& ctx_;
  ModelStates& states_;
  std::vector<UnitState> units_;
  std::vector<std::vector<int>> module_units_;  // module -> its units
  std::vector<int> fetch_count_;                // per module: Fetch minus Release
  std::vector<int> trace_;                      // modules fetched this step, in order
  size_t live_elements_ = 0;
  FetchPlan plan_;  // from the first step's trace, once every rank agrees on it
  // On ctx.stream when this rank's pieces were last updated (Refresh):
  // gathers wait for it.
  std::shared_ptr<Event> pieces_ready_;
  uint64_t quantized_calls_ = 0;  // seeds stochastic rounding
  Communicator* node_ = nullptr;  // hpZ: the node's group, when on
};

}  // namespace zero
