// The caller's zero_collectives (zero_engine.h) as the C++ table of
// zero/comm/callback_communicator.h: element types and reductions become
// NCCL's codes (zero/comm/nccl_codes.h), and a non-zero return, with the
// text the function left through zero_comm_set_error, becomes an Internal
// status. The functions run on the communicator's thread, so the text is
// kept per thread.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "zero/capi/zero_engine.h"
#include "zero/comm/communicator.h"

namespace zero::capi {

// Rank `rank` of `world_size` over a copy of `fns`. InvalidArgument when
// fns.size is not this library's sizeof(zero_collectives), or as
// CallbackCommunicator::Create (a bad rank, a missing collective).
absl::StatusOr<std::unique_ptr<Communicator>> MakeCallbackCommunicator(
    int rank, int world_size, const zero_collectives& fns);

// zero_comm_set_error: the text of this thread's function about to fail.
void SetCollectiveError(std::string_view message);

}  // namespace zero::capi
