#include "zero/layout.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "base/fingerprint.h"
#include "base/units.h"

namespace zero {

absl::Status ValidateParams(const std::vector<ParamSpec>& params) {
  absl::flat_hash_map<std::string, int> seen;
  for (int i = 0; i < static_cast<int>(params.size()); ++i) {
    const ParamSpec& p = params[i];
    if (p.name.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("parameter #%d has no name", i));
    }
    if (p.numel == 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("parameter '%s' (#%d) has zero elements", p.name, i));
    }
    // Module ids index per-module tables (the stage-3 fetch plan): a negative
    // one wrote before them, a huge one sized them to billions of entries.
    if (p.module < 0 || p.module >= static_cast<int>(params.size())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "parameter '%s' (#%d) is in module %d: module ids run from 0 to %d (at most one "
          "module per parameter)",
          p.name, i, p.module, params.size() - 1));
    }
    auto [it, inserted] = seen.emplace(p.name, i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "parameter '%s' registered twice (#%d and #%d)", p.name, it->second, i));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Layout> Layout::Create(std::vector<ParamSpec> params, int world_size,
                                      size_t bucket_elements, bool split_at_modules) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("world size %d < 1", world_size));
  }
  if (bucket_elements == 0) return absl::InvalidArgumentError("bucket_elements is zero");
  if (absl::Status s = ValidateParams(params); !s.ok()) return s;
  Layout layout;
  layout.world_size_ = world_size;
  const size_t quantum = world_size * kAlign;
  auto close_unit = [&](int end) {
    Unit& u = layout.units_.back();
    u.end_param = end;
    u.padded = RoundUp(u.extent, quantum);
    u.shard = u.padded / world_size;
    u.shard_offset = layout.padded_ / world_size;
    layout.padded_ += u.padded;
  };
  for (int i = 0; i < static_cast<int>(params.size()); ++i) {
    ParamSpec& p = params[i];
    const bool new_unit =
        layout.units_.empty() ||
        layout.units_.back().numel + p.numel > bucket_elements ||
        (split_at_modules && layout.units_.back().module != p.module);
    if (new_unit) {
      if (!layout.units_.empty()) close_unit(i);
      layout.units_.push_back(Unit{.offset = layout.padded_, .numel = 0, .extent = 0, .padded = 0,
                                   .shard = 0, .shard_offset = 0, .first_param = i,
                                   .end_param = i, .module = p.module});
    }
    Unit& u = layout.units_.back();
    layout.by_name_[p.name] = i;
    const size_t begin = RoundUp(u.extent, kAlign);  // unit offsets are multiples of kAlign
    layout.params_.push_back(ParamSlot{std::move(p.name), p.numel, p.module,
                                       static_cast<int>(layout.units_.size()) - 1,
                                       u.offset + begin});
    u.numel += p.numel;
    u.extent = begin + p.numel;
    layout.numel_ += p.numel;
  }
  if (!layout.units_.empty()) close_unit(static_cast<int>(params.size()));
  return layout;
}

int Layout::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

std::vector<std::pair<size_t, size_t>> Layout::PaddingOf(int unit) const {
  const Unit& u = units_[unit];
  std::vector<std::pair<size_t, size_t>> padding;
  size_t end = 0;  // of the previous parameter
  for (int p = u.first_param; p < u.end_param; ++p) {
    const size_t begin = params_[p].offset - u.offset;
    if (begin > end) padding.emplace_back(end, begin);
    end = begin + params_[p].numel;
  }
  if (u.padded > end) padding.emplace_back(end, u.padded);
  return padding;
}

std::vector<ParamExtent> Layout::ParamExtents() const {
  std::vector<ParamExtent> extents;
  for (const Unit& u : units_) {
    for (int p = u.first_param; p < u.end_param; ++p) {
      const size_t end = p + 1 < u.end_param ? params_[p + 1].offset : u.offset + u.padded;
      extents.push_back({params_[p].offset, end, p});
    }
  }
  return extents;
}

std::vector<Piece> Layout::PiecesOf(int param) const {
  const ParamSlot& p = params_[param];
  const Unit& u = units_[p.unit];
  std::vector<Piece> pieces;
  size_t begin = p.offset - u.offset;  // within the unit
  const size_t end = begin + p.numel;
  while (begin < end) {
    const int rank = static_cast<int>(begin / u.shard);
    const size_t in_piece = begin % u.shard;
    const size_t count = std::min(end - begin, u.shard - in_piece);
    pieces.push_back(Piece{rank, begin - (p.offset - u.offset), u.shard_offset + in_piece, count});
    begin += count;
  }
  return pieces;
}

uint64_t Layout::Fingerprint() const {
  auto mix = [](uint64_t h, uint64_t v) { return Fnv1a(&v, sizeof v, h); };
  uint64_t h = mix(mix(kFnvBasis, world_size_), padded_);
  for (const ParamSlot& p : params_) {
    h = mix(mix(Fnv1a(p.name.data(), p.name.size(), h), p.numel), p.offset);
  }
  return h;
}

}  // namespace zero
