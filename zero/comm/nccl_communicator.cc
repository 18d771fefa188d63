#include "zero/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "memory/cuda/driver_api.h"
#include "zero/comm/call_history.h"
#include "zero/comm/comm_errors.h"
#include "zero/comm/nccl_api.h"
#include "zero/comm/nccl_sequence_check.h"

namespace zero {
namespace {

using cuda::RuntimeStatus;
using nccl::NcclApi;
using nccl::NcclSequenceCheck;
using nccl::NcclStatus;
using nccl::ToNccl;

// Thread-safety: Execute runs on the rank's thread; Abort may come from any
// thread. mu_ is held while NCCL calls are enqueued (brief: they are
// asynchronous), never while waiting on the stream, so Abort can interrupt
// a sequence check that waits for a missing rank.
class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const NcclApi* api, ncclComm_t comm, int rank, int world_size, int device,
                   float* scratch, std::unique_ptr<NcclSequenceCheck> check, NcclOptions options)
      : api_(api),
        comm_(comm),
        rank_(rank),
        world_size_(world_size),
        device_(device),
        scratch_(scratch),
        check_(std::move(check)),
        options_(options),
        history_(static_cast<size_t>(options.check_every)) {}

  ~NcclCommunicator() override {
    cudaSetDevice(device_);
    if (!aborted_) api_->CommDestroy(comm_);
    cudaFree(scratch_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  void Abort(const absl::Status& reason) override;
  absl::Status AsyncError() const override;

 protected:
  absl::Status Execute(const CollectiveCall& call, const void* send, void* recv, Stream* stream,
                       const absl::Status& invalid) override;

 private:
  absl::Status Issue(const CollectiveCall& call, const void* send, void* recv,
                     cudaStream_t s) const;
  absl::Status Check(cudaStream_t stream);
  // Keeps the first error; later calls return it.
  void Poison(absl::Status status);

  const NcclApi* const api_;
  const ncclComm_t comm_;
  const int rank_;
  const int world_size_;
  const int device_;
  float* const scratch_;  // one float on the card, for Barrier
  const std::unique_ptr<NcclSequenceCheck> check_;
  const NcclOptions options_;
  CallHistory history_;  // rank thread only

  // Mutable: AsyncError() keeps what NCCL reports, so later calls fail fast.
  mutable std::mutex mu_;
  mutable absl::Status poison_;            // guarded by mu_
  bool aborted_ = false;                   // guarded by mu_ (read unlocked in the destructor)
  mutable std::atomic<bool> stop_{false};  // set with poison_, read while waiting unlocked
};

void NcclCommunicator::Poison(absl::Status status) {
  std::lock_guard lock(mu_);
  if (poison_.ok()) poison_ = std::move(status);
  stop_ = true;
}

void NcclCommunicator::Abort(const absl::Status& reason) {
  std::lock_guard lock(mu_);
  if (poison_.ok()) poison_ = reason.ok() ? absl::CancelledError("communicator aborted") : reason;
  stop_ = true;
  if (!aborted_ && api_->CommAbort != nullptr) {
    aborted_ = true;
    api_->CommAbort(comm_);
  }
}

// ncclInProgress is not an error: a nonblocking communicator still working.
absl::Status NcclCommunicator::AsyncError() const {
  std::lock_guard lock(mu_);
  if (!poison_.ok() || aborted_ || api_->CommGetAsyncError == nullptr) return poison_;
  ncclResult_t async = ncclSuccess;
  absl::Status status =
      NcclStatus(*api_, api_->CommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
  if (status.ok() && async != ncclSuccess && async != ncclInProgress) {
    status = NcclStatus(*api_, async, "NCCL asynchronous error");
  }
  if (!status.ok()) {
    poison_ = status;
    stop_ = true;
  }
  return status;
}

absl::Status NcclCommunicator::Issue(const CollectiveCall& call, const void* send, void* recv,
                                     cudaStream_t s) const {
  const ncclDataType_t type = ToNccl(call.dtype);
  ncclResult_t result = ncclSuccess;
  switch (call.kind) {
    case CollectiveKind::kAllGather:
      result = api_->AllGather(send, recv, call.count, type, comm_, s);
      break;
    case CollectiveKind::kReduceScatter:
      result = api_->ReduceScatter(send, recv, call.count, type, ToNccl(call.op), comm_, s);
      break;
    case CollectiveKind::kAllReduce:
      result = api_->AllReduce(send, recv, call.count, type, ToNccl(call.op), comm_, s);
      break;
    case CollectiveKind::kBroadcast:
      result = api_->Broadcast(send, recv, call.count, type, call.root, comm_, s);
      break;
    case CollectiveKind::kBarrier:  // NCCL has none: a one-element all-reduce orders the streams
      result = api_->AllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, s);
      break;
  }
  return NcclStatus(*api_, result, absl::StrFormat("nccl%s", Name(call.kind)).c_str());
}

absl::Status NcclCommunicator::Check(cudaStream_t stream) {
  {
    std::lock_guard lock(mu_);
    if (!poison_.ok()) return poison_;
    RETURN_IF_ERROR(check_->Start(*api_, comm_, history_, stream));
  }
  absl::Status status = check_->Finish(stream, absl::Now() + options_.check_timeout, stop_);
  if (absl::IsDeadlineExceeded(status)) Abort(status);  // NCCL would wait forever
  return status;
}

absl::Status NcclCommunicator::Execute(const CollectiveCall& call, const void* send, void* recv,
                                       Stream* stream, const absl::Status& invalid) {
  absl::Status bad = invalid;
  if (bad.ok() && stream != nullptr && stream->native_handle() == nullptr) {
    bad = absl::InvalidArgumentError(
        absl::StrFormat("%s on rank %d: NCCL needs a CUDA stream", call.ToString(), rank_));
  }
  {
    std::lock_guard lock(mu_);
    if (!poison_.ok()) return poison_;
  }
  const uint64_t seq = history_.Record(call, bad.ok());
  const cudaStream_t s =
      stream != nullptr ? static_cast<cudaStream_t>(stream->native_handle()) : nullptr;
  RETURN_IF_ERROR(RuntimeStatus(cudaSetDevice(device_), "cudaSetDevice"));
  if (check_ != nullptr && seq % options_.check_every == 0) {
    if (absl::Status status = Check(s); !status.ok()) {
      Poison(status);
      return bad.ok() ? status : bad;
    }
  }
  if (!bad.ok()) {
    // Skipping the call desynchronizes this rank from its peers: fail fast.
    Poison(RankFailedError(seq, rank_, bad));
    return bad;
  }
  std::lock_guard lock(mu_);
  if (!poison_.ok()) return poison_;
  absl::Status status = Issue(call, send, recv, s);
  if (!status.ok() && poison_.ok()) poison_ = status;
  return status;
}

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

// Takes ownership of comms[i] (rank first_rank + i on devices[i]); on error
// destroys those not yet wrapped.
absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> Wrap(const NcclApi* api,
                                                                std::vector<ncclComm_t> comms,
                                                                int first_rank, int world_size,
                                                                absl::Span<const int> devices,
                                                                const NcclOptions& options) {
  std::vector<std::unique_ptr<Communicator>> group;
  absl::Status status;
  for (size_t i = 0; i < comms.size(); ++i) {
    float* scratch = nullptr;
    std::unique_ptr<NcclSequenceCheck> check;
    status = RuntimeStatus(cudaSetDevice(devices[i]), "cudaSetDevice");
    if (status.ok()) status = RuntimeStatus(cudaMalloc(&scratch, sizeof(float)), "cudaMalloc");
    if (status.ok() && options.check_every > 0) {
      auto made =
          NcclSequenceCheck::Create(devices[i], first_rank + i, world_size, options.check_every);
      status = made.status();
      if (made.ok()) check = *std::move(made);
    }
    if (!status.ok()) {
      if (scratch != nullptr) cudaFree(scratch);
      for (size_t j = i; j < comms.size(); ++j) api->CommDestroy(comms[j]);
      return status;
    }
    group.push_back(std::make_unique<NcclCommunicator>(
        api, comms[i], first_rank + i, world_size, devices[i], scratch, std::move(check), options));
  }
  return group;
}

absl::Status CheckOptions(const NcclOptions& options) {
  if (options.check_every < 0) return absl::InvalidArgumentError("check_every < 0");
  if (options.check_every > 0 && options.check_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("check_timeout must be positive");
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

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> NcclGroup::CreateAll(
    absl::Span<const int> devices, NcclOptions options) {
  RETURN_IF_ERROR(CheckOptions(options));
  RETURN_IF_ERROR(CheckDevices(devices));
  ASSIGN_OR_RETURN(const NcclApi* api, nccl::GetNcclApi());
  const int n = static_cast<int>(devices.size());
  std::vector<ncclComm_t> comms(n, nullptr);
  RETURN_IF_ERROR(
      NcclStatus(*api, api->CommInitAll(comms.data(), n, devices.data()), "ncclCommInitAll"));
  return Wrap(api, std::move(comms), 0, n, devices, options);
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
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  // Several ranks in one process must initialize inside one group.
  RETURN_IF_ERROR(NcclStatus(*api, api->GroupStart(), "ncclGroupStart"));
  absl::Status status;
  for (size_t i = 0; i < devices.size() && status.ok(); ++i) {
    status = RuntimeStatus(cudaSetDevice(devices[i]), "cudaSetDevice");
    if (status.ok()) {
      status = NcclStatus(*api, api->CommInitRank(&comms[i], world_size, id, first_rank + i),
                          "ncclCommInitRank");
    }
  }
  absl::Status ended = NcclStatus(*api, api->GroupEnd(), "ncclGroupEnd");
  if (status.ok()) status = ended;
  if (!status.ok()) {
    for (ncclComm_t comm : comms) {
      if (comm != nullptr) api->CommDestroy(comm);
    }
    return status;
  }
  // Every rank has read the id once initialization completed. A file left
  // behind harms no one in this job, so a failure here is not one.
  if (first_rank == 0) (void)RemoveId(rendezvous);
  return Wrap(api, std::move(comms), first_rank, world_size, devices, options);
}

absl::Status NcclGroupStart() {
  ASSIGN_OR_RETURN(const NcclApi* api, nccl::GetNcclApi());
  return NcclStatus(*api, api->GroupStart(), "ncclGroupStart");
}

absl::Status NcclGroupEnd() {
  ASSIGN_OR_RETURN(const NcclApi* api, nccl::GetNcclApi());
  return NcclStatus(*api, api->GroupEnd(), "ncclGroupEnd");
}

}  // namespace zero
