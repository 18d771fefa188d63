// NCCL, loaded at run time: dlopen of $ZERO_NCCL_LIBRARY if set, else
// "libnccl.so.2" (found through LD_LIBRARY_PATH or ld.so.cache). Nothing
// links NCCL, so every binary starts where it is absent; nccl.h supplies
// only the types.
#pragma once

#include <nccl.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  // Optional: nullptr when the library lacks them.
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
};

// Loads the library once per process (thread-safe; never unloaded).
// Unavailable when it is missing, lacks a required symbol, or is older than
// 2.10 (the first with bf16 and ncclAvg).
absl::StatusOr<const NcclApi*> GetNcclApi();

// OK for ncclSuccess; else "what: <NCCL's message> (code)" as InvalidArgument
// (invalid argument or usage) or Internal.
absl::Status NcclStatus(const NcclApi& api, ncclResult_t result, const char* what);

// Both total over valid enums (ValidateCall runs first).
ncclDataType_t ToNccl(DType dtype);
ncclRedOp_t ToNccl(ReduceOp op);

}  // namespace zero::nccl
