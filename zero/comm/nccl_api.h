// NCCL, loaded at run time: dlopen of $ZERO_NCCL_LIBRARY if set, else
// "libnccl.so.2" (found through LD_LIBRARY_PATH or ld.so.cache). Nothing
// links NCCL, so every binary starts where it is absent; nccl.h supplies
// only the types.
#pragma once

#include <nccl.h>

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/dtype.h"
#include "zero/comm/collective.h"

namespace zero::nccl {

struct NcclApi {
  int version = 0;  // NCCL_VERSION_CODE of the loaded library, e.g. 22809
  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRank) CommInitRank = nullptr;
  decltype(&::ncclCommInitAll) CommInitAll = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclAllGather) AllGather = nullptr;
  decltype(&::ncclReduceScatter) ReduceScatter = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclBroadcast) Broadcast = nullptr;
  decltype(&::ncclSend) Send = nullptr;
  decltype(&::ncclRecv) Recv = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  // Optional: nullptr when the library lacks them. Without
  // CommInitRankConfig (before 2.14) communicators are blocking and
  // initialization has no timeout; without CommAbort or CommGetAsyncError
  // the watchdog can only report a hang, not end it; without CommFinalize
  // (before 2.14) a healthy communicator is destroyed at once; without
  // GetLastError (before 2.13) errors carry only GetErrorString's words.
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclCommInitRankConfig) CommInitRankConfig = nullptr;
  decltype(&::ncclCommFinalize) CommFinalize = nullptr;
  decltype(&::ncclGetLastError) GetLastError = nullptr;
};

// Loads the library once per process (thread-safe; never unloaded).
// Unavailable when it is missing, lacks a required symbol, or is older than
// 2.10 (the first with bf16 and ncclAvg).
absl::StatusOr<const NcclApi*> GetNcclApi();

// OK for ncclSuccess; else "what: <NCCL's message> (code)" as InvalidArgument
// (invalid argument or usage) or Internal, followed by "; NCCL's last error:
// <text>" when GetLastError has text (NCCL's latest error message, process
// wide: usually this failure's detail, e.g. which peer or socket).
absl::Status NcclStatus(const NcclApi& api, ncclResult_t result, const char* what);

// Waits while a non-blocking communicator reports ncclInProgress (after its
// initialization or a call that returned ncclInProgress), polling
// ncclCommGetAsyncError until `deadline`: OK once it reports ncclSuccess, the
// error it reports, or DeadlineExceeded naming `what`. OK at once without
// CommGetAsyncError (then the communicator is blocking). Between polls it
// calls `pause` with the time to wait (default: sleeps it); a pause that
// returns an error ends the wait with it (a caller that releases a lock
// while pausing returns the abort that came meanwhile: the comm is gone).
using CommPause = absl::FunctionRef<absl::Status(absl::Duration)>;
absl::Status SleepPause(absl::Duration pause);
absl::Status AwaitComm(const NcclApi& api, ncclComm_t comm, absl::Time deadline,
                       const std::string& what, CommPause pause = SleepPause);

// Both total over valid enums (ValidateCall runs first); the numbers are
// nccl_codes.h's table.
ncclDataType_t ToNccl(DType dtype);
ncclRedOp_t ToNccl(ReduceOp op);

}  // namespace zero::nccl
