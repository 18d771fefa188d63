#include "zero/comm/nccl_sequence_check.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "memory/cuda/current_device.h"
#include "memory/cuda/driver_api.h"
#include "zero/comm/nccl_rank_device.h"

namespace zero::nccl {
namespace {

using cuda::RuntimeStatus;

// The check on a card: its buffers are the card's memory and pinned host
// memory, its copies and queries the CUDA runtime's.
class CardSequenceCheck final : public NcclSequenceCheck {
 public:
  // Owns `gathered` (cudaMalloc on `device`) and `host` (cudaMallocHost),
  // either of which may be null.
  CardSequenceCheck(int device, int rank, int world_size, int window, uint64_t* gathered,
                    uint64_t* host)
      : NcclSequenceCheck(rank, world_size, window, gathered, host), device_(device) {}
  ~CardSequenceCheck() override {
    cuda::ScopedDevice card(device_);
    if (gathered() != nullptr) cudaFree(gathered());
    if (host() != nullptr) cudaFreeHost(host());
  }

 protected:
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                         cudaStream_t stream) override {
    return RuntimeStatus(cudaMemcpyAsync(dst, src, bytes, kind, stream), "cudaMemcpyAsync");
  }
  absl::StatusOr<bool> StreamDone(cudaStream_t stream) override {
    const cudaError_t state = cudaStreamQuery(stream);
    if (state == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not sticky, but keep the runtime's last error clean
      return false;
    }
    RETURN_IF_ERROR(RuntimeStatus(state, "cudaStreamQuery"));
    return true;
  }

 private:
  const int device_;
};

}  // namespace

NcclSequenceCheck::NcclSequenceCheck(int rank, int world_size, int window, uint64_t* gathered,
                                     uint64_t* host)
    : rank_(rank),
      world_size_(world_size),
      window_(window),
      words_(Words(window)),
      gathered_(gathered),
      host_(host) {}

absl::StatusOr<std::unique_ptr<NcclSequenceCheck>> NcclSequenceCheck::Create(int device, int rank,
                                                                             int world_size,
                                                                             int window) {
  const size_t bytes = Words(window) * world_size * sizeof(uint64_t);
  uint64_t* gathered = nullptr;
  uint64_t* host = nullptr;
  const absl::Status status = RunOnCard(device, [&] {
    RETURN_IF_ERROR(RuntimeStatus(cudaMalloc(&gathered, bytes), "cudaMalloc"));
    return RuntimeStatus(cudaMallocHost(&host, bytes), "cudaMallocHost");
  });
  // Made before the status is looked at: it frees whatever was allocated.
  std::unique_ptr<NcclSequenceCheck> check =
      std::make_unique<CardSequenceCheck>(device, rank, world_size, window, gathered, host);
  RETURN_IF_ERROR(status);
  return check;
}

absl::Status NcclSequenceCheck::Start(const NcclApi& api, ncclComm_t comm,
                                      const CallHistory& history, cudaStream_t stream,
                                      Settle settle) {
  check_seq_ = history.seq();
  const std::vector<uint64_t> mine = Serialize(history, window_);
  uint64_t* host_slot = host_ + rank_ * words_;
  uint64_t* gathered_slot = gathered_ + rank_ * words_;
  std::copy(mine.begin(), mine.end(), host_slot);
  const size_t bytes = words_ * sizeof(uint64_t);
  RETURN_IF_ERROR(CopyAsync(gathered_slot, host_slot, bytes, cudaMemcpyHostToDevice, stream));
  // ncclInProgress (a non-blocking communicator): the copy back may be
  // enqueued only once the communicator is done with the all-gather.
  RETURN_IF_ERROR(
      settle(api.AllGather(gathered_slot, gathered_, words_, ncclUint64, comm, stream)));
  return CopyAsync(host_, gathered_, bytes * world_size_, cudaMemcpyDeviceToHost, stream);
}

absl::Status NcclSequenceCheck::Finish(cudaStream_t stream, absl::Time deadline,
                                       const std::atomic<bool>& stop) {
  // Polls rather than cudaStreamSynchronize, which could wait forever.
  while (true) {
    ASSIGN_OR_RETURN(const bool done, StreamDone(stream));
    if (done) break;
    if (stop.load()) return absl::CancelledError("the communicator was aborted");
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "the sequence check before collective #%d did not finish: a rank is missing or "
          "issued a different collective before it",
          check_seq_));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::vector<HistorySummary> ranks;
  for (int r = 0; r < world_size_; ++r) {
    ranks.push_back(Deserialize(absl::MakeConstSpan(host_ + r * words_, words_)));
  }
  return CompareHistories(ranks);
}

}  // namespace zero::nccl
