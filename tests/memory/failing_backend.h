// A backend that forwards to another one (a host backend in the tests),
// counts each step of backing memory, remembers what is created and mapped,
// fails a chosen call of a chosen step on command, and can renumber its
// devices' native ids. Test-only; one
// thread drives it at a time.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "memory/backend.h"

namespace zero::testing {

enum class Step { kCreate, kMap, kSetAccess, kUnmap, kRelease };
inline constexpr Step kSteps[] = {Step::kCreate, Step::kMap, Step::kSetAccess, Step::kUnmap,
                                  Step::kRelease};

class FailingBackend final : public Backend {
 public:
  explicit FailingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  // The `nth` next call of `step` (1: the next one) fails with Internal.
  void FailAt(Step step, int nth = 1) { fail_at_[step] = calls(step) + nth; }
  int calls(Step step) const {
    auto it = calls_.find(step);
    return it == calls_.end() ? 0 : it->second;
  }
  // Handles created and not released; chunks mapped and not unmapped.
  const std::set<PhysicalHandle>& live_handles() const { return live_; }
  const std::map<uintptr_t, size_t>& mappings() const { return mapped_; }
  const std::vector<int>& last_access() const { return last_access_; }

  DeviceKind kind() const override { return inner_->kind(); }
  int device_count() const override { return inner_->device_count(); }
  // Device d answers to native id ids[d] from now on (as "cuda:2,0" would).
  void Renumber(std::vector<int> ids) { ids_ = std::move(ids); }
  int native_id(int device) const override {
    return ids_.empty() ? inner_->native_id(device) : ids_[device];
  }
  size_t capacity(int device) const override { return inner_->capacity(device); }
  size_t granularity() const override { return inner_->granularity(); }
  // What a card's backend keeps free by default, in small.
  void set_default_reserve(MemoryReserve reserve) { reserve_ = reserve; }
  MemoryReserve default_reserve() const override {
    return reserve_.value_or(inner_->default_reserve());
  }
  bool has_bytes() const override { return inner_->has_bytes(); }
  absl::StatusOr<uintptr_t> Reserve(size_t bytes) override { return inner_->Reserve(bytes); }
  absl::Status Unreserve(uintptr_t base, size_t bytes) override {
    return inner_->Unreserve(base, bytes);
  }
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream(int device) override {
    return inner_->CreateStream(device);
  }

  absl::StatusOr<PhysicalHandle> CreatePhysical(int device, size_t bytes) override {
    if (Fails(Step::kCreate)) return absl::InternalError("create failed on command");
    absl::StatusOr<PhysicalHandle> handle = inner_->CreatePhysical(device, bytes);
    if (handle.ok()) live_.insert(*handle);
    return handle;
  }
  absl::Status MapPhysical(uintptr_t addr, size_t bytes, PhysicalHandle handle) override {
    if (Fails(Step::kMap)) return absl::InternalError("map failed on command");
    absl::Status status = inner_->MapPhysical(addr, bytes, handle);
    if (status.ok()) mapped_[addr] = bytes;
    return status;
  }
  absl::Status SetAccess(uintptr_t addr, size_t bytes, std::span<const int> devices) override {
    if (Fails(Step::kSetAccess)) return absl::InternalError("set access failed on command");
    last_access_.assign(devices.begin(), devices.end());
    return inner_->SetAccess(addr, bytes, devices);
  }
  absl::Status UnmapPhysical(uintptr_t addr, size_t bytes) override {
    if (Fails(Step::kUnmap)) return absl::InternalError("unmap failed on command");
    absl::Status status = inner_->UnmapPhysical(addr, bytes);
    if (status.ok()) mapped_.erase(addr);
    return status;
  }
  absl::Status ReleasePhysical(PhysicalHandle handle) override {
    if (Fails(Step::kRelease)) return absl::InternalError("release failed on command");
    live_.erase(handle);
    return inner_->ReleasePhysical(handle);
  }

 private:
  bool Fails(Step step) {
    const int call = ++calls_[step];
    auto it = fail_at_.find(step);
    return it != fail_at_.end() && it->second == call;
  }

  std::unique_ptr<Backend> inner_;
  std::map<Step, int> calls_, fail_at_;
  std::vector<int> ids_;  // empty: the inner backend's
  std::optional<MemoryReserve> reserve_;
  std::set<PhysicalHandle> live_;
  std::map<uintptr_t, size_t> mapped_;
  std::vector<int> last_access_;
};

}  // namespace zero::testing
