#include "memory/device_system.h"

#include <cstdlib>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "base/units.h"
#include "memory/cuda/cuda_backend.h"
#include "memory/simulated_backend.h"

ABSL_FLAG(std::string, zero_devices, "",
          "Devices to run on: auto, cuda, host:NxSIZE or meta:NxSIZE (e.g. host:8x16GiB). "
          "Overrides $ZERO_DEVICES.");

namespace zero {

absl::StatusOr<DeviceSpec> ParseDeviceSpec(std::string_view text) {
  std::pair<std::string, std::string> parts = absl::StrSplit(std::string(text), ':');
  DeviceSpec spec;
  if (parts.first == "auto") spec.kind = DeviceSpec::Kind::kAuto;
  else if (parts.first == "cuda") spec.kind = DeviceSpec::Kind::kCuda;
  else if (parts.first == "host") spec.kind = DeviceSpec::Kind::kHost;
  else if (parts.first == "meta") spec.kind = DeviceSpec::Kind::kMeta;
  else {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device spec '%s': kind must be auto, cuda, host or meta", std::string(text)));
  }
  if (parts.second.empty()) return spec;
  const bool simulated = spec.kind == DeviceSpec::Kind::kHost || spec.kind == DeviceSpec::Kind::kMeta;
  std::pair<std::string, std::string> shape = absl::StrSplit(parts.second, 'x');
  if (!simulated || shape.second.empty() || !absl::SimpleAtoi(shape.first, &spec.count) ||
      spec.count <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device spec '%s': expected host:NxSIZE or meta:NxSIZE with N > 0", std::string(text)));
  }
  absl::StatusOr<size_t> capacity = ParseBytes(shape.second);
  if (!capacity.ok() || *capacity < SimulatedBackend::kGranularity) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device spec '%s': capacity must be at least 2 MiB", std::string(text)));
  }
  spec.capacity = *capacity;
  return spec;
}

absl::StatusOr<DeviceSpec> DeviceSpecFromEnvironment() {
  std::string text = absl::GetFlag(FLAGS_zero_devices);
  if (text.empty()) {
    const char* env = std::getenv("ZERO_DEVICES");
    text = env != nullptr ? env : "auto";
  }
  return ParseDeviceSpec(text);
}

namespace {

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const DeviceSpec& spec,
                                                     const HostStreamOptions& streams) {
  switch (spec.kind) {
    case DeviceSpec::Kind::kCuda:
      return CreateCudaBackend();
    case DeviceSpec::Kind::kAuto: {
      absl::StatusOr<std::unique_ptr<Backend>> cuda = CreateCudaBackend();
      // No driver or no card is the normal case on CI and laptops.
      if (cuda.ok() || !absl::IsUnavailable(cuda.status())) return cuda;
      return std::unique_ptr<Backend>(
          std::make_unique<HostBackend>(spec.count, spec.capacity, streams));
    }
    case DeviceSpec::Kind::kHost:
      return std::unique_ptr<Backend>(
          std::make_unique<HostBackend>(spec.count, spec.capacity, streams));
    case DeviceSpec::Kind::kMeta:
      return std::unique_ptr<Backend>(std::make_unique<MetaBackend>(spec.count, spec.capacity));
  }
  return absl::InvalidArgumentError("unknown device kind");
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceSystem>> DeviceSystem::Create(const DeviceSpec& spec,
                                                                   PoolOptions options) {
  return CreateWithHostStreams(spec, {}, options);
}

absl::StatusOr<std::unique_ptr<DeviceSystem>> DeviceSystem::CreateWithHostStreams(
    const DeviceSpec& spec, const HostStreamOptions& host_streams, PoolOptions options) {
  std::unique_ptr<DeviceSystem> system(new DeviceSystem());
  system->host_streams_ = host_streams;
  const bool may_be_host =
      spec.kind == DeviceSpec::Kind::kHost || spec.kind == DeviceSpec::Kind::kAuto;
  if (may_be_host && !host_streams.delayed()) {
    ASSIGN_OR_RETURN(system->host_streams_, HostStreamDelayFromEnvironment());
  }
  ASSIGN_OR_RETURN(system->backend_, MakeBackend(spec, system->host_streams_));
  if (system->kind() != DeviceKind::kHost) system->host_streams_ = {};
  ASSIGN_OR_RETURN(system->space_, UvaSpace::Create(system->backend_.get()));
  for (int d = 0; d < system->device_count(); ++d) {
    ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, system->backend_->CreateStream(d));
    system->pools_.push_back(
        std::make_unique<DevicePool>(d, system->space_.get(), stream.get(), options));
    system->default_streams_.push_back(std::move(stream));
  }
  return system;
}

absl::StatusOr<std::unique_ptr<DeviceSystem>> DeviceSystem::CreateFromEnvironment(
    PoolOptions options) {
  ASSIGN_OR_RETURN(DeviceSpec spec, DeviceSpecFromEnvironment());
  return Create(spec, options);
}

DeviceSystem::~DeviceSystem() {
  // Pools first (they unmap, syncing streams), then streams, then the space.
  pools_.clear();
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    streams_.clear();
  }
  default_streams_.clear();
  space_.reset();
}

absl::StatusOr<Stream*> DeviceSystem::CreateStream(int device) {
  if (device < 0 || device >= device_count()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no device %d (there are %d)", device, device_count()));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, backend_->CreateStream(device));
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.push_back(std::move(stream));
  return streams_.back().get();
}

absl::StatusOr<Stream*> DeviceSystem::WrapNativeStream(int device, void* native) {
  if (device < 0 || device >= device_count()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no device %d (there are %d)", device, device_count()));
  }
  std::lock_guard<std::mutex> lock(streams_mu_);
  auto [it, inserted] = wrapped_.try_emplace({device, native}, nullptr);
  if (!inserted) return it->second;
  absl::StatusOr<std::unique_ptr<Stream>> stream = backend_->WrapNativeStream(device, native);
  if (!stream.ok()) {
    wrapped_.erase(it);
    return stream.status();
  }
  streams_.push_back(*std::move(stream));
  return it->second = streams_.back().get();
}

absl::Status DeviceSystem::Deallocate(void* ptr, size_t bytes, Stream* stream) {
  std::optional<int> device = device_of(ptr);
  if (!device) {
    return absl::NotFoundError(absl::StrFormat("%p is not in the UVA space of any device", ptr));
  }
  return pools_[*device]->Deallocate(ptr, bytes, stream);
}

std::string DeviceSystem::Summary() const {
  std::string out;
  for (const auto& pool : pools_) {
    PoolStats s = pool->stats();
    absl::StrAppendFormat(&out, "device %d (%s): capacity %s, allocated %s (peak %s), reserved %s (peak %s)\n",
                          s.device, std::string(DeviceKindName(backend_->kind())),
                          FormatBytes(s.capacity), FormatBytes(s.allocated),
                          FormatBytes(s.peak_allocated), FormatBytes(s.reserved),
                          FormatBytes(s.peak_reserved));
  }
  return out;
}

}  // namespace zero
