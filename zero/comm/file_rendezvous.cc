#include "zero/comm/file_rendezvous.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/strings/str_format.h"
#include "base/atomic_file.h"

namespace zero {
namespace {

constexpr std::string_view kMagic = "zero-nccl-id-v1\n";

}  // namespace

absl::Status PublishId(const FileRendezvous& rendezvous, std::string_view id) {
  if (rendezvous.path.empty()) return absl::InvalidArgumentError("rendezvous path is empty");
  return WriteFileAtomically(rendezvous.path, std::string(kMagic) + std::string(id));
}

absl::StatusOr<std::string> AwaitId(const FileRendezvous& rendezvous, size_t bytes) {
  if (rendezvous.path.empty()) return absl::InvalidArgumentError("rendezvous path is empty");
  const absl::Time deadline = absl::Now() + rendezvous.timeout;
  while (true) {
    std::ifstream file(rendezvous.path, std::ios::binary);
    if (file) {
      const std::string contents((std::istreambuf_iterator<char>(file)),
                                 std::istreambuf_iterator<char>());
      if (contents.size() != kMagic.size() + bytes || !contents.starts_with(kMagic)) {
        return absl::DataLossError(absl::StrFormat("%s does not hold a %d-byte id (%d bytes read)",
                                                   rendezvous.path, bytes, contents.size()));
      }
      return contents.substr(kMagic.size());
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrFormat("rank 0 did not publish the NCCL id at %s within %s", rendezvous.path,
                          absl::FormatDuration(rendezvous.timeout)));
    }
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(rendezvous.poll_interval));
  }
}

absl::Status RemoveId(const FileRendezvous& rendezvous) {
  if (std::remove(rendezvous.path.c_str()) == 0 || errno == ENOENT) return absl::OkStatus();
  return absl::InternalError(
      absl::StrFormat("removing %s: %s", rendezvous.path, std::strerror(errno)));
}

}  // namespace zero
