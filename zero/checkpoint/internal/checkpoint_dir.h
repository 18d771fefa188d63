// How checkpoints sit in a folder, so that a failed save never damages the
// one before it:
//
//   <root>/step-120/         one checkpoint: manifest + rank-*-of-*.bin
//   <root>/step-120.1/       a second save at the same step (never overwritten)
//   <root>/latest            "step-120.1\n": the newest complete checkpoint
//
// A save writes into a folder no checkpoint uses yet, writes the manifest
// last and only then repoints `latest` (each atomically), so at any moment
// `latest` names a complete checkpoint or does not exist. A folder without a
// manifest is debris of a failed save and is never read. Old checkpoints are
// kept: deleting them is the caller's policy.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace zero::checkpoint {

inline constexpr char kLatestName[] = "latest";

// Creates `root` if needed and a new, empty "step-<steps>" folder in it
// ("step-<steps>.<k>" when taken); returns its name (not the path).
absl::StatusOr<std::string> CreateStepFolder(const std::string& root, int64_t steps);

// Atomically makes root/latest name `step_folder`.
absl::Status PointLatestAt(const std::string& root, const std::string& step_folder);

// The checkpoint folder `path` designates: `path` itself when it holds a
// manifest, else the folder root/latest names. NotFound, naming both, when
// neither exists.
absl::StatusOr<std::string> ResolveCheckpoint(const std::string& path);

// Whether root/latest names `step_folder` (false when unreadable).
bool LatestNames(const std::string& root, const std::string& step_folder);

// Best effort: removes a failed save's folder, its manifest first (which
// would claim completeness) and the data files in it.
void RemoveFailedSave(const std::string& folder, int world_size);

}  // namespace zero::checkpoint
