// Where every parameter lives in the flat buffers, and which rank owns what.
//
// Parameters are registered in order and packed into units: consecutive
// parameters of about bucket_elements (never splitting a parameter; at stage
// 3 never spanning two modules). Each unit is padded to a multiple of
// world_size * kAlign elements and split into world_size equal pieces: rank
// r owns piece r of every unit. A unit is therefore one true reduce-scatter
// (and one all-gather) with no reduce-to-owner step, and a rank's pieces sit
// back to back in its shard buffers: each rank owns a contiguous, padded
// 1/N of the elements in its own memory. Immutable after Create.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace zero {

struct ParamSpec {
  std::string name;
  size_t numel = 0;
  int module = 0;  // the module that uses it (stage 3 fetches by module)
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
  size_t padded;        // numel rounded up to world_size * kAlign
  size_t shard;         // padded / world_size: each rank's piece
  size_t shard_offset;  // where the pieces sit in a rank's shard buffers
  int first_param;
  int end_param;        // one past the last
  int module;           // stage 3: the module of all its params; else that of the first
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
  // Keeps pieces 16 floats (64 bytes) aligned for SIMD.
  static constexpr size_t kAlign = 16;

  // InvalidArgument for an empty name, a name registered twice, a parameter
  // of zero elements, world_size < 1 or bucket_elements == 0.
  static absl::StatusOr<Layout> Create(std::vector<ParamSpec> params, int world_size,
                                       size_t bucket_elements, bool split_at_modules);

  int world_size() const { return world_size_; }
  const std::vector<ParamSlot>& params() const { return params_; }
  const std::vector<Unit>& units() const { return units_; }
  size_t numel() const { return numel_; }         // parameter elements
  size_t padded_numel() const { return padded_; }  // flat buffer elements
  size_t shard_numel() const { return padded_ / world_size_; }
  // -1 when no parameter has that name.
  int Find(const std::string& name) const;

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
