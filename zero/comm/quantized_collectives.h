// Collectives that move block-quantized chunks (compute/quantize_rule.h),
// DeepSpeed ZeRO++'s qwZ and qgZ, over any communicator:
//
// - QuantizedAllGather (qwZ): each rank quantizes its chunk, the quantized
//   chunks are all-gathered (as 4-byte words, hierarchically where the
//   communicator is), and every rank reads every chunk back, its own too, so
//   all ranks hold the same values.
// - QuantizedReduceScatter (qgZ): each rank quantizes the chunk it sends to
//   each rank and they travel by all-to-all; the receiver reads them back
//   and sums in fp32, in rank order, rounding once. Over a hierarchical
//   communicator (Communicator::levels) it takes two steps, as ZeRO++'s
//   hierarchical all-to-all: inside the node, each rank sums its node's
//   chunks for one local rank in local rank order, quantizes these node
//   sums again and sends them across to their node, where they are summed
//   in node order: the order of hierarchical_communicator.h, and each node
//   sum crosses once, quantized. The second quantization is not fed back.
//
// The result is a sum (divide after, as the engine does). With `residual`
// (world_size * count fp32, error feedback) each rank's outgoing chunks
// quantize gradient + residual and keep what they lost. Scratch comes from
// `scratch` (tagged communication) and goes back in stream order.
// Stochastic rounding draws from format.seed and the element's index in the
// send buffer: change the seed per call (the engine mixes in the step).
#pragma once

#include "absl/status/status.h"
#include "compute/quantize_rule.h"
#include "memory/backend.h"
#include "memory/resource.h"
#include "memory/stream.h"
#include "zero/comm/communicator.h"

namespace zero {

struct QuantizedCollective {
  QuantFormat format;
  DeviceKind kind;            // of the stream's device: where (de)quantization runs
  Stream* stream;             // not null
  MemoryResource* scratch;    // not null
};

// recv (world_size * count of dtype) = every rank's send (count), read back.
absl::Status QuantizedAllGather(Communicator& comm, const void* send, void* recv, size_t count,
                                DType dtype, const QuantizedCollective& how);

// recv (count of dtype) = the sum over ranks of chunk rank() of their send
// (world_size * count), each read back from its quantized form.
absl::Status QuantizedReduceScatter(Communicator& comm, const void* send, void* recv,
                                    size_t count, DType dtype, const QuantizedCollective& how,
                                    float* residual = nullptr);

}  // namespace zero
