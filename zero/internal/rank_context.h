// What every part of one rank's engine shares: the settings and layout, and
// where the rank's work goes (communicator, device memory, stream). Built
// once by the engine, immutable, and outlives the parts that point to it.
#pragma once

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "base/dtype.h"
#include "compute/elementwise_executor.h"
#include "memory/device_system.h"
#include "memory/resource.h"
#include "memory/stream.h"
#include "zero/buffer.h"
#include "zero/comm/communicator.h"
#include "zero/comm/quantized_collectives.h"
#include "zero/config.h"
#include "zero/layout.h"

namespace zero {

struct RankContext {
  EngineConfig config;
  Layout layout;
  // The ranks the model states are sharded over: the whole group, or with
  // hybrid sharding (config.shard_group_size) this rank's shard group.
  Communicator* comm;
  // Hybrid sharding: the ranks that hold the same shards in the other
  // groups (gradients are all-reduced over them); null otherwise.
  Communicator* replicas = nullptr;
  // The communicator the engine was given (`comm` or composed of `comm` and
  // `replicas`): failures, aborts and statistics go through it.
  Communicator* whole = nullptr;
  DeviceSystem* devices;
  MemoryResource* pool;  // device memory of this rank
  // The compute-facing stream: the caller's work, the optimizer, copies in
  // and out. Engine::stream().
  Stream* stream;
  // Where collectives (and the element-wise work on their results) run:
  // its own stream with config.overlap_comm, else `stream`. Work crosses
  // between the two only through events (Stream::Record / Wait).
  Stream* comm_stream;
  // Runs the element-wise work (widen, narrow, accumulate, sums) on
  // `stream`'s device: host loops, card kernels, or nothing on meta.
  const ElementwiseExecutor* elementwise;
  int rank;
  DType dtype;  // of parameters and gradients (config.param_dtype)
  size_t esize;
  bool has_bytes;     // false on meta devices: nothing is read or written
  bool mixed;         // bf16/fp16: fp32 master weights apart from the parameters
  bool master_apart;  // mixed or offloaded: master weights in their own buffer

  const Unit& unit(int u) const { return layout.units()[u]; }
  int unit_count() const { return static_cast<int>(layout.units().size()); }
  bool offload() const { return config.offload != Offload::kNone; }
  bool on_card() const { return devices->kind() == DeviceKind::kCuda; }
  // `elements` of the model dtype into `b`.
  char* At(const Buffer& b, size_t elements) const {
    return b.data<char>() + elements * esize;
  }
  // This rank's piece of `unit` in the flat (whole) buffers.
  size_t owned_offset(int u) const { return unit(u).offset + rank * unit(u).shard; }
  // How a quantized collective (zero/comm/quantized_collectives.h) of
  // `bits` runs on the communication stream; `call` numbers the rank's
  // quantized calls (the same on every rank) and seeds stochastic rounding.
  QuantizedCollective Quantized(int bits, uint64_t call) const {
    QuantFormat format{.bits = bits,
                       .block = config.quantization_block,
                       .stochastic = config.stochastic_rounding,
                       .seed = 0x9E3779B97F4A7C15ull * (call + 1)};
    return {format, devices->kind(), comm_stream, pool};
  }
  // Makes `waiter` start its later work after all work enqueued on `on` so
  // far. Nothing when they are the same stream.
  static absl::Status Order(Stream* waiter, Stream* on) {
    if (waiter == on) return absl::OkStatus();
    absl::StatusOr<std::shared_ptr<Event>> event = on->Record();
    if (!event.ok()) return event.status();
    return waiter->Wait(*event);
  }
};

}  // namespace zero
