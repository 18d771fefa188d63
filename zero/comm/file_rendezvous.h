// How the processes of a multi-node NCCL group agree on NCCL's unique id:
// through a file on a file system they all see.
//
// The process holding rank 0 writes the id with a magic header, atomically
// (temporary file, fsync, rename: a reader never sees half of it); every
// other process polls until the file appears or the timeout passes. The path
// must be new for each job (e.g. contain the job id): a file left by an
// earlier job would be read as this job's id. Rank 0 removes the file once
// the group is up. Functions are thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace zero {

struct FileRendezvous {
  std::string path;
  absl::Duration timeout = absl::Minutes(5);
  absl::Duration poll_interval = absl::Milliseconds(20);
};

// Writes `id` to rendezvous.path (replacing any file there).
absl::Status PublishId(const FileRendezvous& rendezvous, std::string_view id);

// Waits for the file and returns the id it holds, which must be `bytes`
// long. DeadlineExceeded when it does not appear in time, DataLoss when the
// file is not one PublishId wrote for an id of that size.
absl::StatusOr<std::string> AwaitId(const FileRendezvous& rendezvous, size_t bytes);

// Removes the file; OK if it is already gone.
absl::Status RemoveId(const FileRendezvous& rendezvous);

}  // namespace zero
