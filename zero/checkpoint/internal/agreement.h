// Small collectives that keep the ranks of a save or load in step: every
// rank learns every other rank's outcome, so all of them return the same
// error (naming the rank and the file) instead of some hanging or carrying
// on. They go through a device buffer from the rank's pool, as the
// collectives of a real backend (NCCL) require, in fp32 lanes (all-gather
// and broadcast move bytes, they never add). Outcomes agreed on (a corrupt
// file, a full disk) never abort the communicator: a failed load must leave
// the engine able to train on. A rank that cannot take part in one of these
// collectives itself (its buffer cannot be allocated, its stream fails)
// aborts it: its peers would otherwise wait in the collective until the
// timeout, or pair it with this rank's next one.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "memory/pool.h"
#include "memory/stream.h"
#include "zero/comm/communicator.h"

namespace zero::checkpoint {

class Agreement {
 public:
  // All must outlive the Agreement; `stream` is the engine's.
  Agreement(Communicator& comm, MemoryResource& pool, Stream* stream)
      : comm_(comm), pool_(pool), stream_(stream) {}

  int rank() const { return comm_.rank(); }
  int world_size() const { return comm_.world_size(); }

  // Every rank passes a record of the same size; each gets all of them,
  // rank r's at r * record.size().
  absl::StatusOr<std::string> AllGather(std::string_view record);
  // Root 0's `value` (at most kMaxRootBytes) on every rank.
  static constexpr size_t kMaxRootBytes = 1024;
  absl::StatusOr<std::string> FromRoot(std::string_view value);

  // OK on every rank only if `mine` is OK on every rank; otherwise the
  // lowest failing rank's status on all of them, its message prefixed with
  // "rank r: ".
  absl::Status AllOk(const absl::Status& mine);

  // A status as a fixed-size record (message cut to fit), and back: for
  // gathering a status together with other data in one collective.
  static constexpr size_t kStatusBytes = 512;
  static std::string EncodeStatus(const absl::Status& status);
  static absl::Status DecodeStatus(std::string_view record, int rank);
  // The first non-OK status among `world` records of `stride` bytes, each
  // starting with an encoded status; OK when none.
  static absl::Status FirstError(std::string_view records, size_t stride, int world);

 private:
  // `status`, after aborting the communicator when it is an error.
  absl::Status AbortIfError(absl::Status status);
  // `status`, after waiting for the stream when it is an error.
  absl::Status SettleIfError(absl::Status status);

  Communicator& comm_;
  MemoryResource& pool_;
  Stream* const stream_;
};

}  // namespace zero::checkpoint
