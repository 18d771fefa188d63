// Everything memory/ offers, for one process: the devices, one UVA space over
// them, a caching pool and a default stream per device.
//
// Which devices, as text: "auto" uses the cards when a driver and cards are
// present, else host devices; "cuda" every visible card, "cuda:1" or
// "cuda:0,2" only those (no other card gets a context or a stream);
// "host:8x16GiB" 8 host devices of 16 GiB each; "meta:1024x80GB" meta devices
// (accounting only). Options follow, comma-separated, for any kind:
// "chunk=256MiB" (the mapping unit, memory/uva_space.h) and "reserve=4GiB" or
// "reserve=5%" (kept free per device), e.g. "cuda:0,chunk=128MiB,reserve=5%".
// The spec comes from the --zero_devices flag, else the ZERO_DEVICES
// environment variable, else "auto". Host devices' streams take the
// HostStreamOptions given to CreateWithHostStreams (the seeded delay mode of
// memory/stream_delay.h); when those leave it off, $ZERO_HOST_STREAM_DELAY
// decides, so a whole test suite can run delayed.
// Thread-safe after Create; destroy only when no work is pending.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "memory/backend.h"
#include "memory/pool.h"
#include "memory/stream_delay.h"
#include "memory/uva_space.h"

namespace zero {

struct DeviceSpec {
  enum class Kind { kAuto, kCuda, kHost, kMeta } kind = Kind::kAuto;
  int count = 8;                      // host and meta only
  size_t capacity = size_t{16} << 30;  // host and meta only
  std::vector<int> cuda_devices;      // CUDA ordinals; empty: every visible card
  UvaOptions space;                   // chunk and reserve, any kind
};

// Parses the text above; InvalidArgument naming the part that is wrong.
absl::StatusOr<DeviceSpec> ParseDeviceSpec(std::string_view text);
// The flag if set, else $ZERO_DEVICES, else "auto".
absl::StatusOr<DeviceSpec> DeviceSpecFromEnvironment();

// Whether `auto` runs on host devices after the cards failed with `error`:
// always, but only "no driver" or "no card" (Unavailable) goes unexplained;
// any other failure sets `reason`, which Create prints. False for `cuda`.
bool FallsBackToHost(DeviceSpec::Kind kind, const absl::Status& error, std::string* reason);

class DeviceSystem {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceSystem>> Create(const DeviceSpec& spec,
                                                              PoolOptions options = {});
  // InvalidArgument when the options are off and $ZERO_HOST_STREAM_DELAY is
  // malformed (Create too); ignored for other kinds of devices.
  static absl::StatusOr<std::unique_ptr<DeviceSystem>> CreateWithHostStreams(
      const DeviceSpec& spec, const HostStreamOptions& host_streams, PoolOptions options = {});
  static absl::StatusOr<std::unique_ptr<DeviceSystem>> CreateFromEnvironment(
      PoolOptions options = {});
  // Over a backend made elsewhere (tests wrap one to fail or renumber).
  static absl::StatusOr<std::unique_ptr<DeviceSystem>> CreateOver(
      std::unique_ptr<Backend> backend, const UvaOptions& space = {}, PoolOptions options = {});
  ~DeviceSystem();

  DeviceKind kind() const { return backend_->kind(); }
  int device_count() const { return backend_->device_count(); }
  Backend& backend() { return *backend_; }
  // What host streams run with (off on other kinds of devices).
  const HostStreamOptions& host_streams() const { return host_streams_; }
  UvaSpace& space() { return *space_; }
  DevicePool& pool(int device) { return *pools_[device]; }
  Stream* default_stream(int device) { return default_streams_[device].get(); }
  // A new stream, owned by the system.
  absl::StatusOr<Stream*> CreateStream(int device);
  // The system's wrapper of a stream made elsewhere (Backend::WrapNativeStream).
  // One wrapper per (device, handle), so the pool sees one identity per stream.
  // The caller keeps the native stream alive while memory used on it is live.
  absl::StatusOr<Stream*> WrapNativeStream(int device, void* native);
  // The device a native stream (not null) belongs to (Backend's).
  absl::StatusOr<int> DeviceOfNativeStream(void* native) const {
    return backend_->DeviceOfNativeStream(native);
  }

  // What the device's streams (default, created and wrapped) did so far
  // (memory/stream_counts.h); `device` must exist.
  StreamOps stream_ops(int device) const { return counts_[device]->Read(); }

  std::optional<int> device_of(const void* ptr) const { return space_->device_of(ptr); }
  // The device whose Backend::native_id is `native_id` (PyTorch's card
  // number); InvalidArgument naming the ones there are.
  absl::StatusOr<int> DeviceOfNativeId(int native_id) const;
  // Frees through the pool that owns `ptr`.
  absl::Status Deallocate(void* ptr, size_t bytes, Stream* stream = nullptr);

  // One line per device: kind, capacity, allocated, reserved, peaks.
  std::string Summary() const;

 private:
  DeviceSystem() = default;
  // Creates the space, the pools and the default streams over backend_.
  absl::Status Init(const UvaOptions& space, PoolOptions options);

  HostStreamOptions host_streams_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<UvaSpace> space_;
  std::vector<std::unique_ptr<Stream>> default_streams_;
  std::vector<std::unique_ptr<DevicePool>> pools_;
  std::vector<std::shared_ptr<StreamCounts>> counts_;  // per device, shared with its streams
  Mutex streams_mu_;
  std::vector<std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(streams_mu_);
  std::map<std::pair<int, void*>, Stream*> wrapped_ ABSL_GUARDED_BY(streams_mu_);
};

}  // namespace zero
