// What one collective call is: its kind, element type, count, reduction and
// root, as a small value that ranks can compare, print and validate. Both
// backends describe every call with it, so errors read the same everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "base/dtype.h"

namespace zero {

enum class CollectiveKind : uint8_t {
  kAllGather,
  kReduceScatter,
  kAllReduce,
  kBroadcast,
  kBarrier,
  kAllToAll
};
inline constexpr int kNumCollectiveKinds = 6;

std::string_view Name(CollectiveKind kind);  // "AllGather", ...

// kAvg divides the sum by the world size (after summing, in fp32 on host).
enum class ReduceOp : uint8_t { kSum, kAvg, kMax };
inline constexpr int kNumReduceOps = 3;

constexpr bool IsValid(ReduceOp op) { return static_cast<unsigned>(op) < kNumReduceOps; }
std::string_view Name(ReduceOp op);  // "sum", "avg", "max"

// Fields that do not apply to a kind keep their defaults (op only for
// reductions, root only for broadcast, nothing for barrier), so == compares
// exactly what ranks must agree on. `count` is per rank: the elements each
// rank contributes to an all-gather, receives from a reduce-scatter, sends
// to each rank in an all-to-all.
struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::kBarrier;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  size_t count = 0;

  static CollectiveCall AllGather(size_t count, DType dtype);
  static CollectiveCall ReduceScatter(size_t count, DType dtype, ReduceOp op);
  static CollectiveCall AllReduce(size_t count, DType dtype, ReduceOp op);
  static CollectiveCall Broadcast(size_t count, DType dtype, int root);
  static CollectiveCall Barrier();
  static CollectiveCall AllToAll(size_t count, DType dtype);

  bool operator==(const CollectiveCall&) const = default;
  // "AllGather(f32 x 1024)", "AllReduce(bf16 x 8, sum)", "Broadcast(f16 x 4, root 2)".
  std::string ToString() const;
};

// Elements of the send and receive buffers of one rank.
size_t SendElements(const CollectiveCall& call, int world_size);
size_t RecvElements(const CollectiveCall& call, int world_size);

// The balanced split of `count` elements into `parts` contiguous chunks
// (the first count % parts chunks hold one more): chunk `index`.
struct Chunk {
  size_t begin;
  size_t size;
};
Chunk ChunkOf(size_t count, int parts, int index);

// InvalidArgument naming the call and the rank when the arguments are
// unusable: unknown dtype or op, root out of range, a null buffer with
// count > 0 (a non-root's broadcast send may be null, as in NCCL), sizes
// that overflow, or send and recv overlapping other than in place. In place
// is NCCL's rule: all-gather send == recv + rank*count, reduce-scatter
// recv == send + rank*count, all-reduce and broadcast send == recv; an
// all-to-all has no in-place form.
// count == 0 is a valid no-op call (it still takes part in the sequence).
absl::Status ValidateCall(const CollectiveCall& call, const void* send, const void* recv, int rank,
                          int world_size);

}  // namespace zero
