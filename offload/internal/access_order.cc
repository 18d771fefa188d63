#include "offload/internal/access_order.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"

namespace zero {

AccessOrder::AccessOrder(std::vector<uint64_t> ids) : ids_(std::move(ids)) {
  for (size_t i = 0; i < ids_.size(); ++i) positions_[ids_[i]].push_back(i);
}

size_t AccessOrder::NextUse(uint64_t id, size_t from) const {
  auto it = positions_.find(id);
  if (it == positions_.end()) return kNever;
  auto next = std::lower_bound(it->second.begin(), it->second.end(), from);
  return next == it->second.end() ? kNever : *next;
}

std::vector<uint64_t> AccessOrder::Upcoming(size_t from, size_t n) const {
  std::vector<uint64_t> out;
  absl::flat_hash_set<uint64_t> seen;
  for (size_t i = from; i < ids_.size() && out.size() < n; ++i) {
    if (seen.insert(ids_[i]).second) out.push_back(ids_[i]);
  }
  return out;
}

}  // namespace zero
