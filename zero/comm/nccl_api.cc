#include "zero/comm/nccl_api.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "zero/comm/nccl_codes.h"

namespace zero::nccl {
namespace {

constexpr int kMinVersion = 21000;  // 2.10.0

template <class Fn>
bool Resolve(void* library, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(library, name));
  return *fn != nullptr;
}

absl::StatusOr<NcclApi> Load() {
  const char* env = std::getenv("ZERO_NCCL_LIBRARY");
  const std::string path = env != nullptr && *env != '\0' ? env : "libnccl.so.2";
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return absl::UnavailableError(
        absl::StrFormat("NCCL is not available: %s", why != nullptr ? why : path));
  }
  NcclApi api;
  const bool ok = Resolve(library, "ncclGetVersion", &api.GetVersion) &&
                  Resolve(library, "ncclGetUniqueId", &api.GetUniqueId) &&
                  Resolve(library, "ncclCommInitRank", &api.CommInitRank) &&
                  Resolve(library, "ncclCommInitAll", &api.CommInitAll) &&
                  Resolve(library, "ncclCommDestroy", &api.CommDestroy) &&
                  Resolve(library, "ncclAllGather", &api.AllGather) &&
                  Resolve(library, "ncclReduceScatter", &api.ReduceScatter) &&
                  Resolve(library, "ncclAllReduce", &api.AllReduce) &&
                  Resolve(library, "ncclBroadcast", &api.Broadcast) &&
                  Resolve(library, "ncclSend", &api.Send) &&
                  Resolve(library, "ncclRecv", &api.Recv) &&
                  Resolve(library, "ncclGroupStart", &api.GroupStart) &&
                  Resolve(library, "ncclGroupEnd", &api.GroupEnd) &&
                  Resolve(library, "ncclGetErrorString", &api.GetErrorString);
  if (!ok) {
    const std::string why = dlerror();
    dlclose(library);
    return absl::UnavailableError(
        absl::StrFormat("%s lacks a required NCCL symbol: %s", path, why));
  }
  Resolve(library, "ncclCommAbort", &api.CommAbort);
  Resolve(library, "ncclCommGetAsyncError", &api.CommGetAsyncError);
  Resolve(library, "ncclCommInitRankConfig", &api.CommInitRankConfig);
  Resolve(library, "ncclCommFinalize", &api.CommFinalize);
  Resolve(library, "ncclGetLastError", &api.GetLastError);
  if (api.GetVersion(&api.version) != ncclSuccess || api.version < kMinVersion) {
    dlclose(library);
    return absl::UnavailableError(
        absl::StrFormat("%s is NCCL version code %d; need 2.10 or newer", path, api.version));
  }
  return api;  // the library stays loaded for the life of the process
}

}  // namespace

absl::StatusOr<const NcclApi*> GetNcclApi() {
  static const absl::StatusOr<NcclApi> api = Load();
  if (!api.ok()) return api.status();
  return &*api;
}

absl::Status NcclStatus(const NcclApi& api, ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return absl::OkStatus();
  std::string message =
      absl::StrFormat("%s: %s (%d)", what, api.GetErrorString(result), static_cast<int>(result));
  // GetErrorString names only the code ("unhandled system error"); the
  // detail is in NCCL's last error (its argument is unused: null is fine).
  const char* last = api.GetLastError != nullptr ? api.GetLastError(nullptr) : nullptr;
  const absl::string_view detail =
      absl::StripAsciiWhitespace(last != nullptr ? absl::string_view(last) : "");
  if (!detail.empty()) absl::StrAppend(&message, "; NCCL's last error: ", detail);
  if (result == ncclInvalidArgument || result == ncclInvalidUsage) {
    return absl::InvalidArgumentError(message);
  }
  return absl::InternalError(message);
}

absl::Status SleepPause(absl::Duration pause) {
  absl::SleepFor(pause);
  return absl::OkStatus();
}

absl::Status AwaitComm(const NcclApi& api, ncclComm_t comm, absl::Time deadline,
                       const std::string& what, CommPause pause) {
  if (api.CommGetAsyncError == nullptr) return absl::OkStatus();
  // NCCL's own progress threads do the work; the poll only reads a flag.
  absl::Duration wait = absl::Microseconds(10);
  while (true) {
    ncclResult_t state = ncclSuccess;
    RETURN_IF_ERROR(NcclStatus(api, api.CommGetAsyncError(comm, &state), "ncclCommGetAsyncError"));
    if (state != ncclInProgress) return NcclStatus(api, state, what.c_str());
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat("%s did not finish in time", what));
    }
    RETURN_IF_ERROR(pause(wait));
    wait = std::min(wait * 2, absl::Milliseconds(1));
  }
}

// The one code table (nccl_codes.h) is NCCL's own numbering.
static_assert(NcclCode(DType::kF32) == ncclFloat32 && NcclCode(DType::kBF16) == ncclBfloat16 &&
              NcclCode(DType::kF16) == ncclFloat16);
static_assert(NcclCode(ReduceOp::kSum) == ncclSum && NcclCode(ReduceOp::kAvg) == ncclAvg &&
              NcclCode(ReduceOp::kMax) == ncclMax);

ncclDataType_t ToNccl(DType dtype) { return static_cast<ncclDataType_t>(NcclCode(dtype)); }

ncclRedOp_t ToNccl(ReduceOp op) { return static_cast<ncclRedOp_t>(NcclCode(op)); }

}  // namespace zero::nccl
