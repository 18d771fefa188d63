#include "memory/device_system.h"

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "base/units.h"
#include "memory/cuda/cuda_backend.h"
#include "memory/simulated_backend.h"

ABSL_FLAG(std::string, zero_devices, "",
          "Devices to run on: auto, cuda, cuda:0,2, host:NxSIZE or meta:NxSIZE (e.g. "
          "host:8x16GiB), then options chunk=SIZE and reserve=SIZE or reserve=P%. "
          "Overrides $ZERO_DEVICES.");

namespace zero {
namespace {

// Debian's abseil has its own string_view; base/units.h takes the standard one.
absl::StatusOr<size_t> ParseSize(absl::string_view text) {
  return ParseBytes(std::string_view(text.data(), text.size()));
}

absl::Status SpecError(absl::string_view text, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrFormat("device spec '%s': %s", std::string(text), std::string(what)));
}

absl::StatusOr<MemoryReserve> ParseReserve(absl::string_view value) {
  MemoryReserve reserve;
  if (absl::ConsumeSuffix(&value, "%")) {
    double percent = 0;
    if (!absl::SimpleAtod(value, &percent) || percent < 0 || percent >= 100) {
      return absl::InvalidArgumentError("reserve=P% needs 0 <= P < 100");
    }
    reserve.fraction = percent / 100;
    return reserve;
  }
  absl::StatusOr<size_t> bytes = ParseSize(value);
  if (!bytes.ok()) return absl::InvalidArgumentError("reserve must be a size or a percentage");
  reserve.bytes = *bytes;
  return reserve;
}

// "chunk=SIZE" or "reserve=SIZE|P%".
absl::Status ParseOption(absl::string_view option, UvaOptions* space) {
  std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(option, '=');
  if (kv.first == "chunk") {
    absl::StatusOr<size_t> chunk = ParseSize(kv.second);
    if (!chunk.ok() || !IsPowerOfTwo(*chunk) || *chunk < SimulatedBackend::kGranularity) {
      return absl::InvalidArgumentError("chunk must be a power of two of at least 2 MiB");
    }
    space->chunk = *chunk;
    return absl::OkStatus();
  }
  if (kv.first == "reserve") {
    ASSIGN_OR_RETURN(space->reserve, ParseReserve(kv.second));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown option '%s' (chunk= or reserve=)", std::string(option)));
}

// "NxSIZE" of host and meta devices.
absl::Status ParseShape(absl::string_view shape, DeviceSpec* spec) {
  std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(shape, 'x');
  if (parts.second.empty() || !absl::SimpleAtoi(parts.first, &spec->count) || spec->count <= 0) {
    return absl::InvalidArgumentError("expected host:NxSIZE or meta:NxSIZE with N > 0");
  }
  absl::StatusOr<size_t> capacity = ParseSize(parts.second);
  if (!capacity.ok() || *capacity < SimulatedBackend::kGranularity) {
    return absl::InvalidArgumentError("capacity must be at least 2 MiB");
  }
  spec->capacity = *capacity;
  return absl::OkStatus();
}

absl::Status ParseCudaOrdinal(absl::string_view text, DeviceSpec* spec) {
  int ordinal = -1;
  if (!absl::SimpleAtoi(text, &ordinal) || ordinal < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("'%s' is not a card number (cuda:N or cuda:0,2)", std::string(text)));
  }
  if (absl::c_linear_search(spec->cuda_devices, ordinal)) {
    return absl::InvalidArgumentError(absl::StrFormat("card %d is named twice", ordinal));
  }
  spec->cuda_devices.push_back(ordinal);
  return absl::OkStatus();
}

absl::StatusOr<DeviceSpec::Kind> ParseKind(absl::string_view kind) {
  if (kind == "auto") return DeviceSpec::Kind::kAuto;
  if (kind == "cuda") return DeviceSpec::Kind::kCuda;
  if (kind == "host") return DeviceSpec::Kind::kHost;
  if (kind == "meta") return DeviceSpec::Kind::kMeta;
  return absl::InvalidArgumentError("kind must be auto, cuda, host or meta");
}

// Everything after "kind:" split at commas: a shape or card numbers, then
// options.
absl::Status ParseParts(const std::vector<absl::string_view>& parts, bool has_body,
                        DeviceSpec* spec) {
  const bool simulated =
      spec->kind == DeviceSpec::Kind::kHost || spec->kind == DeviceSpec::Kind::kMeta;
  bool options_started = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    const absl::string_view part = parts[i];
    if (absl::StrContains(part, '=')) {
      options_started = true;
      RETURN_IF_ERROR(ParseOption(part, &spec->space));
    } else if (options_started || (i > 0 && simulated) || (i == 0 && !has_body)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("'%s' is out of place: options (key=value) come last",
                          std::string(part)));
    } else if (simulated) {
      RETURN_IF_ERROR(ParseShape(part, spec));
    } else if (spec->kind == DeviceSpec::Kind::kCuda) {
      RETURN_IF_ERROR(ParseCudaOrdinal(part, spec));
    } else {
      return absl::InvalidArgumentError("auto takes options only");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DeviceSpec> ParseDeviceSpec(std::string_view spec_text) {
  const absl::string_view text(spec_text.data(), spec_text.size());
  std::vector<absl::string_view> parts = absl::StrSplit(text, ',');
  std::pair<absl::string_view, absl::string_view> head = absl::StrSplit(parts[0], ':');
  DeviceSpec spec;
  absl::StatusOr<DeviceSpec::Kind> kind = ParseKind(head.first);
  if (!kind.ok()) return SpecError(text, kind.status().message());
  spec.kind = *kind;
  const bool has_body = !head.second.empty();
  if (has_body) parts[0] = head.second;
  else parts.erase(parts.begin());
  if (absl::Status s = ParseParts(parts, has_body, &spec); !s.ok()) {
    return SpecError(text, s.message());
  }
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

bool FallsBackToHost(DeviceSpec::Kind kind, const absl::Status& error, std::string* reason) {
  reason->clear();
  if (kind != DeviceSpec::Kind::kAuto || error.ok()) return false;
  // No driver or no card is the normal case on CI and laptops.
  if (!absl::IsUnavailable(error)) {
    *reason = absl::StrFormat(
        "devices 'auto': the cards cannot be used, running on host devices instead: %s",
        error.ToString());
  }
  return true;
}

namespace {

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const DeviceSpec& spec,
                                                     const HostStreamOptions& streams) {
  if (spec.kind == DeviceSpec::Kind::kCuda || spec.kind == DeviceSpec::Kind::kAuto) {
    absl::StatusOr<std::unique_ptr<Backend>> cuda = CreateCudaBackend(spec.cuda_devices);
    std::string reason;
    if (cuda.ok() || !FallsBackToHost(spec.kind, cuda.status(), &reason)) return cuda;
    if (!reason.empty()) std::fprintf(stderr, "zero: %s\n", reason.c_str());
  }
  if (spec.kind == DeviceSpec::Kind::kMeta) {
    return std::unique_ptr<Backend>(std::make_unique<MetaBackend>(spec.count, spec.capacity));
  }
  return std::unique_ptr<Backend>(
      std::make_unique<HostBackend>(spec.count, spec.capacity, streams));
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
  RETURN_IF_ERROR(system->Init(spec.space, options));
  return system;
}

absl::StatusOr<std::unique_ptr<DeviceSystem>> DeviceSystem::CreateOver(
    std::unique_ptr<Backend> backend, const UvaOptions& space, PoolOptions options) {
  if (backend == nullptr) return absl::InvalidArgumentError("device system: no backend");
  std::unique_ptr<DeviceSystem> system(new DeviceSystem());
  system->backend_ = std::move(backend);
  RETURN_IF_ERROR(system->Init(space, options));
  return system;
}

absl::Status DeviceSystem::Init(const UvaOptions& space, PoolOptions options) {
  ASSIGN_OR_RETURN(space_, UvaSpace::Create(backend_.get(), space));
  RETURN_IF_ERROR(CachingPool::CheckOptions(options, space_->granularity(), "device pools"));
  for (int d = 0; d < device_count(); ++d) {
    counts_.push_back(std::make_shared<StreamCounts>());
    ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, backend_->CreateStream(d));
    stream->CountInto(counts_[d]);
    pools_.push_back(std::make_unique<DevicePool>(d, space_.get(), stream.get(), options));
    default_streams_.push_back(std::move(stream));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> DeviceSystem::DeviceOfNativeId(int native_id) const {
  std::vector<int> ids;
  for (int d = 0; d < device_count(); ++d) {
    if (backend_->native_id(d) == native_id) return d;
    ids.push_back(backend_->native_id(d));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "no device %d (this process uses %s devices %s)", native_id,
      std::string(DeviceKindName(kind())), absl::StrJoin(ids, ", ")));
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
    MutexLock lock(streams_mu_);
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
  stream->CountInto(counts_[device]);
  MutexLock lock(streams_mu_);
  streams_.push_back(std::move(stream));
  return streams_.back().get();
}

absl::StatusOr<Stream*> DeviceSystem::WrapNativeStream(int device, void* native) {
  if (device < 0 || device >= device_count()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no device %d (there are %d)", device, device_count()));
  }
  MutexLock lock(streams_mu_);
  auto [it, inserted] = wrapped_.try_emplace({device, native}, nullptr);
  if (!inserted) return it->second;
  absl::StatusOr<std::unique_ptr<Stream>> stream = backend_->WrapNativeStream(device, native);
  if (!stream.ok()) {
    wrapped_.erase(it);
    return stream.status();
  }
  (*stream)->CountInto(counts_[device]);
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
