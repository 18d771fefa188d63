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

using cuda::RuntimeStatus;

NcclSequenceCheck::NcclSequenceCheck(int device, int rank, int world_size, int window)
    : device_(device),
      rank_(rank),
      world_size_(world_size),
      window_(window),
      words_(2 + 2 * static_cast<size_t>(window)) {}

absl::StatusOr<std::unique_ptr<NcclSequenceCheck>> NcclSequenceCheck::Create(int device, int rank,
                                                                             int world_size,
                                                                             int window) {
  std::unique_ptr<NcclSequenceCheck> check(new NcclSequenceCheck(device, rank, world_size, window));
  const size_t bytes = check->words_ * world_size * sizeof(uint64_t);
  RETURN_IF_ERROR(RunOnCard(device, [&] {
    RETURN_IF_ERROR(RuntimeStatus(cudaMalloc(&check->device_buffer_, bytes), "cudaMalloc"));
    return RuntimeStatus(cudaMallocHost(&check->host_buffer_, bytes), "cudaMallocHost");
  }));
  return check;
}

NcclSequenceCheck::~NcclSequenceCheck() {
  cuda::ScopedDevice card(device_);
  if (device_buffer_ != nullptr) cudaFree(device_buffer_);
  if (host_buffer_ != nullptr) cudaFreeHost(host_buffer_);
}

absl::Status NcclSequenceCheck::Start(const NcclApi& api, ncclComm_t comm,
                                      const CallHistory& history, cudaStream_t stream) {
  check_seq_ = history.seq();
  const std::vector<uint64_t> mine = Serialize(history, window_);
  uint64_t* host_slot = host_buffer_ + rank_ * words_;
  uint64_t* device_slot = device_buffer_ + rank_ * words_;
  std::copy(mine.begin(), mine.end(), host_slot);
  const size_t bytes = words_ * sizeof(uint64_t);
  RETURN_IF_ERROR(
      RuntimeStatus(cudaMemcpyAsync(device_slot, host_slot, bytes, cudaMemcpyHostToDevice, stream),
                    "cudaMemcpyAsync"));
  RETURN_IF_ERROR(
      NcclStatus(api, api.AllGather(device_slot, device_buffer_, words_, ncclUint64, comm, stream),
                 "ncclAllGather (sequence check)"));
  return RuntimeStatus(cudaMemcpyAsync(host_buffer_, device_buffer_, bytes * world_size_,
                                       cudaMemcpyDeviceToHost, stream),
                       "cudaMemcpyAsync");
}

absl::Status NcclSequenceCheck::Finish(cudaStream_t stream, absl::Time deadline,
                                       const std::atomic<bool>& stop) {
  // Polls rather than cudaStreamSynchronize, which could wait forever.
  while (true) {
    const cudaError_t state = cudaStreamQuery(stream);
    if (state == cudaSuccess) break;
    if (state != cudaErrorNotReady) return RuntimeStatus(state, "cudaStreamQuery");
    (void)cudaGetLastError();  // not sticky, but keep the runtime's last error clean
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
    ranks.push_back(Deserialize(absl::MakeConstSpan(host_buffer_ + r * words_, words_)));
  }
  return CompareHistories(ranks);
}

}  // namespace zero::nccl
