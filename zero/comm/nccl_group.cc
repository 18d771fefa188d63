// Creation of NCCL groups: device checks, the unique-id exchange and the
// non-blocking initialization of several ranks.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "zero/comm/nccl_communicator.h"

namespace zero {
namespace {

using nccl::NcclApi;
using nccl::NcclStatus;

absl::Status CheckDevices(absl::Span<const int> devices) {
  if (devices.empty()) return absl::InvalidArgumentError("no devices given");
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    return absl::UnavailableError(
        absl::StrFormat("NCCL needs CUDA cards: %s",
                        error != cudaSuccess ? cudaGetErrorString(error) : "no card found"));
  }
  absl::flat_hash_set<int> seen;
  for (int d : devices) {
    if (d < 0 || d >= count) {
      return absl::InvalidArgumentError(
          absl::StrFormat("no CUDA device %d (%d present)", d, count));
    }
    if (!seen.insert(d).second) {
      return absl::InvalidArgumentError(absl::StrFormat("device %d listed twice", d));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOptions(const NcclOptions& options) {
  if (options.check_every < 0) return absl::InvalidArgumentError("NcclOptions::check_every < 0");
  for (auto [name, value] : {std::pair{"check_timeout", options.check_timeout},
                             {"timeout", options.timeout},
                             {"init_timeout", options.init_timeout},
                             {"poll_interval", options.poll_interval}}) {
    if (value <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrFormat("NcclOptions::%s must be positive", name));
    }
  }
  return absl::OkStatus();
}

// ncclUniqueId from rank 0's process, through the rendezvous file.
absl::StatusOr<ncclUniqueId> ExchangeId(const NcclApi& api, bool creator,
                                        const FileRendezvous& rendezvous) {
  ncclUniqueId id;
  if (creator) {
    RETURN_IF_ERROR(NcclStatus(api, api.GetUniqueId(&id), "ncclGetUniqueId"));
    RETURN_IF_ERROR(PublishId(rendezvous, std::string_view(id.internal, sizeof id.internal)));
    return id;
  }
  ASSIGN_OR_RETURN(const std::string bytes, AwaitId(rendezvous, sizeof id.internal));
  bytes.copy(id.internal, sizeof id.internal);
  return id;
}

// Starts every rank's initialization inside one group (several ranks of one
// process must); returns the first error. comms[i] is set once started.
absl::Status StartInit(const NcclApi& api, const ncclUniqueId& id, int first_rank, int world_size,
                       absl::Span<const int> devices, nccl::OnCardFn on_card,
                       std::vector<ncclComm_t>& comms) {
  RETURN_IF_ERROR(NcclStatus(api, api.GroupStart(), "ncclGroupStart"));
  absl::Status status;
  for (size_t i = 0; i < devices.size() && status.ok(); ++i) {
    const int rank = first_rank + static_cast<int>(i);
    status = on_card(devices[i], [&] {
      ncclResult_t result = ncclSuccess;
      if (api.CommInitRankConfig != nullptr) {
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;  // returns at once; AwaitComm bounds the wait
        result = api.CommInitRankConfig(&comms[i], world_size, id, rank, &config);
      } else {
        result = api.CommInitRank(&comms[i], world_size, id, rank);
      }
      if (result == ncclInProgress) return absl::OkStatus();
      return NcclStatus(api, result, absl::StrFormat("ncclCommInitRank of rank %d", rank).c_str());
    });
  }
  const ncclResult_t ended = api.GroupEnd();
  if (status.ok() && ended != ncclInProgress) status = NcclStatus(api, ended, "ncclGroupEnd");
  return status;
}

}  // namespace

namespace nccl {
namespace {

// Ends a communicator that failed or whose peers may never come with
// ncclCommAbort: ncclCommDestroy could wait on them forever (a library
// without ncclCommAbort can only destroy).
void AbortComm(const NcclApi& api, ncclComm_t comm) {
  if (api.CommAbort != nullptr) {
    api.CommAbort(comm);
  } else {
    api.CommDestroy(comm);
  }
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> WrapComms(
    const NcclApi* api, std::vector<ncclComm_t> comms, int first_rank, int world_size,
    absl::Span<const int> devices, const NcclOptions& options, MakeDeviceFn make_device) {
  std::vector<std::unique_ptr<Communicator>> group;
  for (size_t i = 0; i < comms.size(); ++i) {
    absl::StatusOr<std::unique_ptr<NcclRankDevice>> device = make_device(devices[i]);
    absl::Status status = device.status();
    // A default StatusOr is an error (UNKNOWN), so no check is a plain null.
    std::unique_ptr<NcclSequenceCheck> check;
    if (status.ok() && options.check_every > 0) {
      absl::StatusOr<std::unique_ptr<NcclSequenceCheck>> made = NcclSequenceCheck::Create(
          devices[i], first_rank + i, world_size, options.check_every);
      status = made.status();
      if (made.ok()) check = *std::move(made);
    }
    if (!status.ok()) {
      // The group is incomplete, so every rank's peers (in this process and
      // others) wait in vain: abort all, wrapped or not.
      for (std::unique_ptr<Communicator>& comm : group) comm->Abort(status);
      for (size_t j = i; j < comms.size(); ++j) AbortComm(*api, comms[j]);
      return status;
    }
    group.push_back(WrapComm(api, comms[i], first_rank + i, world_size, *std::move(device),
                             options, std::move(check)));
  }
  return group;
}

// Blocking communicators: a call may block in the host (connecting to a
// peer that never comes) holding the communicator's lock, where neither its
// watchdog nor Abort can end it. NCCL_COMM_BLOCKING=1 asks for them over
// ncclConfig_t, and is refused; NCCL before 2.14 has no other kind, which
// is said once on stderr.
absl::Status CheckNonBlocking(const NcclApi& api) {
  if (api.CommInitRankConfig == nullptr) {
    static std::once_flag said;
    std::call_once(said, [&] {
      std::fprintf(stderr,
                   "zero: NCCL %d.%d has only blocking communicators (non-blocking ones came in "
                   "2.14): a call that blocks in the host cannot be ended by the watchdog\n",
                   api.version / 10000, api.version % 10000 / 100);
    });
    return absl::OkStatus();
  }
  const char* blocking = std::getenv("NCCL_COMM_BLOCKING");
  if (blocking != nullptr && std::atoi(blocking) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "NCCL_COMM_BLOCKING=%s makes every NCCL call able to block in the host, where the "
        "watchdog cannot end it (a peer that never comes would hang this rank): unset it",
        blocking));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ncclComm_t>> InitComms(const NcclApi& api, const ncclUniqueId& id,
                                                  int first_rank, int world_size,
                                                  absl::Span<const int> devices,
                                                  absl::Duration timeout, OnCardFn on_card) {
  RETURN_IF_ERROR(CheckNonBlocking(api));
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  absl::Status status = StartInit(api, id, first_rank, world_size, devices, on_card, comms);
  for (size_t i = 0; i < comms.size() && status.ok(); ++i) {
    status = AwaitComm(api, comms[i], deadline,
                       absl::StrFormat("initialization of NCCL rank %d of %d on CUDA card %d",
                                       first_rank + i, world_size, devices[i]));
  }
  if (status.ok()) return comms;
  for (ncclComm_t comm : comms) {  // abort, not destroy: a peer may never come
    if (comm != nullptr) AbortComm(api, comm);
  }
  return status;
}

}  // namespace nccl

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> NcclGroup::CreateAll(
    absl::Span<const int> devices, NcclOptions options) {
  RETURN_IF_ERROR(CheckOptions(options));
  RETURN_IF_ERROR(CheckDevices(devices));
  ASSIGN_OR_RETURN(const NcclApi* api, nccl::GetNcclApi());
  ncclUniqueId id;
  RETURN_IF_ERROR(NcclStatus(*api, api->GetUniqueId(&id), "ncclGetUniqueId"));
  const int n = static_cast<int>(devices.size());
  ASSIGN_OR_RETURN(std::vector<ncclComm_t> comms,
                   nccl::InitComms(*api, id, 0, n, devices, options.init_timeout));
  return nccl::WrapComms(api, std::move(comms), 0, n, devices, options);
}

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> NcclGroup::CreateMultiNode(
    int first_rank, int world_size, const FileRendezvous& rendezvous, absl::Span<const int> devices,
    NcclOptions options) {
  RETURN_IF_ERROR(CheckOptions(options));
  if (first_rank < 0 || world_size < 1 ||
      first_rank + static_cast<int64_t>(devices.size()) > world_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ranks %d..%d do not fit a world of %d", first_rank,
                        first_rank + static_cast<int64_t>(devices.size()) - 1, world_size));
  }
  RETURN_IF_ERROR(CheckDevices(devices));
  ASSIGN_OR_RETURN(const NcclApi* api, nccl::GetNcclApi());
  ASSIGN_OR_RETURN(const ncclUniqueId id, ExchangeId(*api, first_rank == 0, rendezvous));
  ASSIGN_OR_RETURN(std::vector<ncclComm_t> comms, nccl::InitComms(*api, id, first_rank, world_size,
                                                                  devices, options.init_timeout));
  // Every rank has read the id once initialization completed. A file left
  // behind harms no one in this job, so a failure here is not one.
  if (first_rank == 0) (void)RemoveId(rendezvous);
  return nccl::WrapComms(api, std::move(comms), first_rank, world_size, devices, options);
}

absl::Status NcclGroupStart() {
  ASSIGN_OR_RETURN(const NcclApi* api, nccl::GetNcclApi());
  return nccl::GroupStart(*api);
}

absl::Status NcclGroupEnd() {
  ASSIGN_OR_RETURN(const NcclApi* api, nccl::GetNcclApi());
  return nccl::GroupEnd(*api);
}

}  // namespace zero
