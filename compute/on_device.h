// The one seam between host, card and meta devices for work ordered on a
// stream: compute's element-wise executor and the optimizers' stream-ordered
// step both go through it, so neither the engine nor any other caller
// branches on the kind of device.
//  - host devices: `host` runs as a task of the host stream, in order;
//  - cards: `launch(native_device, native_stream)` enqueues the kernels on
//    the stream's cudaStream_t and returns; counted as one operation on the
//    stream (memory/stream_counts.h), as the host task is;
//  - meta devices: nothing (no bytes).
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "memory/backend.h"
#include "memory/stream.h"

namespace zero {

// `kind` is the stream's DeviceSystem's (DeviceSystem::kind()).
template <class HostWork, class CardLaunch>
absl::Status RunOnDevice(DeviceKind kind, Stream& stream, HostWork&& host, CardLaunch&& launch) {
  switch (kind) {
    case DeviceKind::kCuda: {
      // The card number, not the pool's index: it picks the card of CUDA's
      // default stream (a null handle), which "cuda:2" makes device 0.
      absl::Status launched =
          std::forward<CardLaunch>(launch)(stream.native_device(), stream.native_handle());
      if (launched.ok()) stream.counts().Enqueued();
      return launched;
    }
    case DeviceKind::kMeta:
      return absl::OkStatus();
    case DeviceKind::kHost:
      break;
  }
  return stream.Enqueue(std::forward<HostWork>(host));
}

}  // namespace zero
