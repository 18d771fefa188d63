#include "zero/comm/collective.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#include "absl/strings/str_format.h"

namespace zero {

std::string_view Name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather: return "AllGather";
    case CollectiveKind::kReduceScatter: return "ReduceScatter";
    case CollectiveKind::kAllReduce: return "AllReduce";
    case CollectiveKind::kBroadcast: return "Broadcast";
    case CollectiveKind::kBarrier: return "Barrier";
    case CollectiveKind::kAllToAll: return "AllToAll";
  }
  return "UnknownCollective";
}

std::string_view Name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
  }
  return "invalid-op";
}

CollectiveCall CollectiveCall::AllGather(size_t count, DType dtype) {
  return {.kind = CollectiveKind::kAllGather, .dtype = dtype, .count = count};
}

CollectiveCall CollectiveCall::ReduceScatter(size_t count, DType dtype, ReduceOp op) {
  return {.kind = CollectiveKind::kReduceScatter, .dtype = dtype, .op = op, .count = count};
}

CollectiveCall CollectiveCall::AllReduce(size_t count, DType dtype, ReduceOp op) {
  return {.kind = CollectiveKind::kAllReduce, .dtype = dtype, .op = op, .count = count};
}

CollectiveCall CollectiveCall::Broadcast(size_t count, DType dtype, int root) {
  return {.kind = CollectiveKind::kBroadcast, .dtype = dtype, .root = root, .count = count};
}

CollectiveCall CollectiveCall::Barrier() { return {.kind = CollectiveKind::kBarrier}; }

CollectiveCall CollectiveCall::AllToAll(size_t count, DType dtype) {
  return {.kind = CollectiveKind::kAllToAll, .dtype = dtype, .count = count};
}

namespace {

bool IsReduction(CollectiveKind kind) {
  return kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kAllReduce;
}

}  // namespace

std::string CollectiveCall::ToString() const {
  if (kind == CollectiveKind::kBarrier) return "Barrier()";
  std::string text = absl::StrFormat("%s(%s x %d", Name(kind), Name(dtype), count);
  if (IsReduction(kind)) absl::StrAppendFormat(&text, ", %s", Name(op));
  if (kind == CollectiveKind::kBroadcast) absl::StrAppendFormat(&text, ", root %d", root);
  return text + ")";
}

size_t SendElements(const CollectiveCall& call, int world_size) {
  return call.kind == CollectiveKind::kReduceScatter || call.kind == CollectiveKind::kAllToAll
             ? call.count * world_size
         : call.kind == CollectiveKind::kBarrier     ? 0
                                                     : call.count;
}

size_t RecvElements(const CollectiveCall& call, int world_size) {
  return call.kind == CollectiveKind::kAllGather || call.kind == CollectiveKind::kAllToAll
             ? call.count * world_size
         : call.kind == CollectiveKind::kBarrier ? 0
                                                 : call.count;
}

Chunk ChunkOf(size_t count, int parts, int index) {
  const size_t base = count / parts, extra = count % parts;
  const size_t i = static_cast<size_t>(index);
  return {.begin = i * base + std::min(i, extra), .size = base + (i < extra ? 1 : 0)};
}

namespace {

// Where this rank's send must sit relative to recv to be in place, in
// bytes (send - recv); no value when the kind has no in-place form here.
std::optional<ptrdiff_t> InPlaceOffset(const CollectiveCall& call, int rank) {
  const ptrdiff_t chunk = static_cast<ptrdiff_t>(call.count * SizeOf(call.dtype));
  switch (call.kind) {
    case CollectiveKind::kAllGather: return rank * chunk;
    case CollectiveKind::kReduceScatter: return -rank * chunk;
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBroadcast: return 0;
    case CollectiveKind::kBarrier:
    case CollectiveKind::kAllToAll: return std::nullopt;
  }
  return std::nullopt;
}

absl::Status CheckBuffers(const CollectiveCall& call, const void* send, const void* recv, int rank,
                          int world_size) {
  const bool send_used = call.kind != CollectiveKind::kBroadcast || rank == call.root;
  if (recv == nullptr) return absl::InvalidArgumentError("recv buffer is null");
  if (send_used && send == nullptr) return absl::InvalidArgumentError("send buffer is null");
  if (!send_used) return absl::OkStatus();  // a non-root's send is never read
  const uintptr_t s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  const size_t elem = SizeOf(call.dtype);
  const uintptr_t s_end = s + SendElements(call, world_size) * elem;
  const uintptr_t r_end = r + RecvElements(call, world_size) * elem;
  if (s_end <= r || r_end <= s) return absl::OkStatus();
  if (static_cast<ptrdiff_t>(s - r) == InPlaceOffset(call, rank)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "send and recv overlap but are not in place (all-gather: send == recv + rank*count; "
      "reduce-scatter: recv == send + rank*count; all-to-all: none; others: send == recv)");
}

absl::Status CheckFields(const CollectiveCall& call, int world_size) {
  if (static_cast<unsigned>(call.kind) >= kNumCollectiveKinds) {
    return absl::InvalidArgumentError("unknown collective kind");
  }
  if (!IsValid(call.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown dtype %d", static_cast<int>(call.dtype)));
  }
  if (IsReduction(call.kind) && !IsValid(call.op)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown reduce op %d", static_cast<int>(call.op)));
  }
  if (call.kind == CollectiveKind::kBroadcast && (call.root < 0 || call.root >= world_size)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("root %d is outside [0, %d)", call.root, world_size));
  }
  // Every buffer size below is count * world_size * element size.
  if (call.count > std::numeric_limits<size_t>::max() / 2 / world_size / SizeOf(call.dtype)) {
    return absl::InvalidArgumentError("count overflows the buffer size");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateCall(const CollectiveCall& call, const void* send, const void* recv, int rank,
                          int world_size) {
  absl::Status status = CheckFields(call, world_size);
  if (status.ok() && call.count > 0) status = CheckBuffers(call, send, recv, rank, world_size);
  if (status.ok()) return status;
  return absl::InvalidArgumentError(
      absl::StrFormat("%s on rank %d: %s", call.ToString(), rank, status.message()));
}

}  // namespace zero
