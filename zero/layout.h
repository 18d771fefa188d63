// Where every parameter lives in the flat buffers, and which rank owns what.
//
// Parameters are registered in order and placed into units: consecutive
// parameters of about bucket_elements (never splitting a parameter; at stage
// 3 never spanning two modules). Every parameter starts at a multiple of
// kAlign elements in the flat buffer (vectorized kernels read it whole);
// the gaps, like the units' tails, are zero padding. Each unit is padded to
// a multiple of world_size * kAlign elements and split into world_size
// equal pieces: rank
// r owns piece r of every unit. A unit is therefore one true reduce-scatter
// (and one all-gather) with no reduce-to-owner step, and a rank's pieces sit
// back to back in its shard buffers: each rank owns a contiguous, padded
// 1/N of the elements in its own memory. Immutable after Create.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace zero {

struct ParamSpec {
  std::string name;
  size_t numel = 0;
  int module = 0;  // the module that uses it (stage 3 fetches by module), 0..params-1
};

struct ParamSlot {
  std::string name;
  size_t numel;
  int module;
  int unit;
  size_t offset;  // in the flat (unsharded) buffer
};

struct Unit {
  size_t offset;        // first element in the flat buffer
  size_t numel;         // parameter elements
  size_t extent;        // to the end of the last parameter: numel plus alignment gaps
  size_t padded;        // extent rounded up to world_size * kAlign
  size_t shard;         // padded / world_size: each rank's piece
  size_t shard_offset;  // where the pieces sit in a rank's shard buffers
  int first_param;
  int end_param;        // one past the last
  int module;           // stage 3: the module of all its params; else that of the first
};

// Flat elements [begin, end) that go with parameter `param`.
struct ParamExtent {
  size_t begin, end;
  int param;
};

// A run of a parameter held by one rank.
struct Piece {
  int rank;
  size_t param_offset;  // element within the parameter
  size_t shard_offset;  // element within that rank's shard buffer
  size_t count;
};

class Layout {
 public:
  // Parameters and pieces start at multiples of 16 elements (64 bytes of
  // fp32, 32 of bf16): 16-byte vector loads and SIMD lines need no tail.
  static constexpr size_t kAlign = 16;

  // InvalidArgument for an empty name, a name registered twice, a parameter
  // of zero elements, world_size < 1 or bucket_elements == 0.
  static absl::StatusOr<Layout> Create(std::vector<ParamSpec> params, int world_size,
                                       size_t bucket_elements, bool split_at_modules);

  int world_size() const { return world_size_; }
  const std::vector<ParamSlot>& params() const { return params_; }
  const std::vector<Unit>& units() const { return units_; }
  size_t numel() const { return numel_; }         // parameter elements
  size_t padded_numel() const { return padded_; }  // flat buffer elements, padding included
  size_t shard_numel() const { return padded_ / world_size_; }
  // -1 when no parameter has that name.
  int Find(const std::string& name) const;

  // Unit `unit`'s padding as [begin, end) element ranges from the unit's
  // offset, in order: the alignment gap before each parameter that has one,
  // then the tail. Backward writes only parameters, so gradient buffers
  // zero these.
  std::vector<std::pair<size_t, size_t>> PaddingOf(int unit) const;
  // Each parameter's elements and the gap or padding after it, up to the
  // next parameter or its unit's end, in parameter order: together they
  // tile the flat buffer, so a per-parameter setting (an optimizer group)
  // covers every element a step sees.
  std::vector<ParamExtent> ParamExtents() const;
  // The ranks' runs of parameter `param`, in parameter order.
  std::vector<Piece> PiecesOf(int param) const;
  // Same for every rank with the same parameters and world size.
  uint64_t Fingerprint() const;

 private:
  int world_size_ = 1;
  std::vector<ParamSlot> params_;
  std::vector<Unit> units_;
  absl::flat_hash_map<std::string, int> by_name_;
  size_t numel_ = 0, padded_ = 0;
};

}  // namespace zero
