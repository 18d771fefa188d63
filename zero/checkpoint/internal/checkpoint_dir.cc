#include "zero/checkpoint/internal/checkpoint_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "zero/checkpoint/internal/data_file.h"
#include "zero/checkpoint/internal/file_io.h"
#include "zero/checkpoint/internal/manifest.h"

namespace zero::checkpoint {

absl::StatusOr<std::string> CreateStepFolder(const std::string& root, int64_t steps) {
  RETURN_IF_ERROR(MakeDirectories(root));
  const std::string base = absl::StrCat("step-", steps);
  for (int k = 0;; ++k) {
    const std::string name = k == 0 ? base : absl::StrCat(base, ".", k);
    const std::string path = absl::StrCat(root, "/", name);
    RETURN_IF_ERROR(FaultPoint(FileOp::kCreate, path));
    if (mkdir(path.c_str(), 0755) == 0) return name;
    if (errno != EEXIST) {
      return absl::InternalError(
          absl::StrFormat("cannot create checkpoint folder '%s': %s", path, std::strerror(errno)));
    }
  }
}

absl::Status PointLatestAt(const std::string& root, const std::string& step_folder) {
  return WriteWholeFileAtomically(absl::StrCat(root, "/", kLatestName),
                                  absl::StrCat(step_folder, "\n"));
}

absl::StatusOr<std::string> ResolveCheckpoint(const std::string& path) {
  if (FileExists(absl::StrCat(path, "/", kManifestName))) return path;
  const std::string latest = absl::StrCat(path, "/", kLatestName);
  absl::StatusOr<std::string> name = ReadWholeFile(latest);
  if (absl::IsNotFound(name.status())) {
    return absl::NotFoundError(
        // The path once: the message crosses ranks in a bounded record
        // (Agreement::kStatusBytes) and sandboxes make paths long.
        absl::StrFormat("no checkpoint at '%s': it holds neither a '%s' nor a '%s' file", path,
                        kManifestName, kLatestName));
  }
  if (!name.ok()) return name.status();
  const std::string folder(absl::StripAsciiWhitespace(*name));
  if (folder.empty() || folder.find('/') != std::string::npos || folder[0] == '.') {
    return absl::DataLossError(absl::StrFormat(
        "'%s' should name a checkpoint folder beside it, not '%s'", latest, folder));
  }
  return absl::StrCat(path, "/", folder);
}

bool LatestNames(const std::string& root, const std::string& step_folder) {
  absl::StatusOr<std::string> name = ReadWholeFile(absl::StrCat(root, "/", kLatestName));
  return name.ok() && absl::StripAsciiWhitespace(*name) == step_folder;
}

void RemoveFailedSave(const std::string& folder, int world_size) {
  unlink(absl::StrCat(folder, "/", kManifestName).c_str());  // first: it claims completeness
  for (int r = 0; r < world_size; ++r) {
    unlink(absl::StrCat(folder, "/", DataFileName(r, world_size)).c_str());
    // SaveOptions::publish_when_written's record beside it.
    unlink(absl::StrCat(folder, "/", DataFileName(r, world_size), ".record").c_str());
  }
  rmdir(folder.c_str());  // fails, harmlessly, if anything else is left
}

}  // namespace zero::checkpoint
