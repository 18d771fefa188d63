#include "zero/comm/communicator.h"

namespace zero {

absl::Status Communicator::AllGather(const void* send, void* recv, size_t count, DType dtype,
                                     Stream* stream) {
  return Run(CollectiveCall::AllGather(count, dtype), send, recv, stream);
}

absl::Status Communicator::ReduceScatter(const void* send, void* recv, size_t count, DType dtype,
                                         ReduceOp op, Stream* stream) {
  return Run(CollectiveCall::ReduceScatter(count, dtype, op), send, recv, stream);
}

absl::Status Communicator::AllReduce(const void* send, void* recv, size_t count, DType dtype,
                                     ReduceOp op, Stream* stream) {
  return Run(CollectiveCall::AllReduce(count, dtype, op), send, recv, stream);
}

absl::Status Communicator::Broadcast(const void* send, void* recv, size_t count, DType dtype,
                                     int root, Stream* stream) {
  return Run(CollectiveCall::Broadcast(count, dtype, root), send, recv, stream);
}

absl::Status Communicator::AllToAll(const void* send, void* recv, size_t count, DType dtype,
                                    Stream* stream) {
  return Run(CollectiveCall::AllToAll(count, dtype), send, recv, stream);
}

absl::Status Communicator::Barrier(Stream* stream) {
  return Run(CollectiveCall::Barrier(), nullptr, nullptr, stream);
}

CommStats Communicator::stats() const {
  MutexLock lock(stats_mu_);
  return stats_;
}

void Communicator::CountBackendBytes(uint64_t copied, uint64_t reduced) {
  MutexLock lock(stats_mu_);
  stats_.copied_bytes += copied;
  stats_.reduced_bytes += reduced;
}

absl::Status Communicator::Run(const CollectiveCall& call, const void* send, void* recv,
                               Stream* stream) {
  const absl::Status invalid = ValidateCall(call, send, recv, rank(), world_size());
  absl::Status status = Execute(call, send, recv, stream, invalid);
  if (!invalid.ok() && status.ok()) return invalid;  // a backend must not run a bad call
  if (!status.ok()) return status;
  MutexLock lock(stats_mu_);
  stats_.Add(call, rank(), topology());
  return status;
}

}  // namespace zero
