// The order in which one step acquired tensors, and, from any position in
// it, when each tensor is used next: what the pager's Belady eviction
// (evict the one used furthest ahead) and its prefetch read.
//
// A value type: the pager records one step and replays it as the forecast
// for the next. Not thread-safe on its own; the pager's lock guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace zero {

class AccessOrder {
 public:
  static constexpr size_t kNever = std::numeric_limits<size_t>::max();

  AccessOrder() = default;
  explicit AccessOrder(std::vector<uint64_t> ids);

  bool empty() const { return ids_.empty(); }
  size_t size() const { return ids_.size(); }
  const std::vector<uint64_t>& ids() const { return ids_; }

  // The first position >= `from` at which `id` is used; kNever if none.
  size_t NextUse(uint64_t id, size_t from) const;
  // Up to `n` distinct ids used at positions >= `from`, in order of next use.
  std::vector<uint64_t> Upcoming(size_t from, size_t n) const;

 private:
  std::vector<uint64_t> ids_;
  absl::flat_hash_map<uint64_t, std::vector<size_t>> positions_;  // ascending
};

}  // namespace zero
