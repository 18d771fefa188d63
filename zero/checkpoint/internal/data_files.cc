#include "zero/checkpoint/internal/data_files.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "zero/checkpoint/internal/data_file.h"
#include "zero/checkpoint/internal/verified_reader.h"

namespace zero::checkpoint {

DataFiles::DataFiles(std::string folder, const Manifest& manifest, int max_open)
    : folder_(std::move(folder)), manifest_(manifest), max_open_(std::max(1, max_open)) {}

absl::StatusOr<std::shared_ptr<DirectFile>> DataFiles::OpenChecked(int index) const {
  const std::string path = absl::StrCat(folder_, "/", manifest_.files[index].name);
  ASSIGN_OR_RETURN(DirectFile file, DirectFile::Open(path, FileMode::kRead));
  ASSIGN_OR_RETURN(uint64_t size, file.Size());
  std::string header(size >= kDataHeaderBytes ? kDataHeaderBytes : 0, '\0');
  RETURN_IF_ERROR(file.ReadAt(0, header.data(), header.size()));
  RETURN_IF_ERROR(CheckDataFile(manifest_, index, size, header, path));
  return std::make_shared<DirectFile>(std::move(file));
}

// Opening happens under the lock: it is rare (readers go through the files
// in order) and two readers of a new file then open it once.
absl::StatusOr<std::shared_ptr<DirectFile>> DataFiles::Get(int index) {
  MutexLock lock(mu_);
  auto it = std::find_if(open_.begin(), open_.end(), [&](const auto& f) { return f.first == index; });
  if (it != open_.end()) {
    open_.splice(open_.begin(), open_, it);
    return open_.front().second;
  }
  ASSIGN_OR_RETURN(std::shared_ptr<DirectFile> file, OpenChecked(index));
  ++opens_;
  open_.emplace_front(index, file);
  while (static_cast<int>(open_.size()) > max_open_) open_.pop_back();
  return file;
}

int DataFiles::open_now() const {
  MutexLock lock(mu_);
  return static_cast<int>(open_.size());
}

uint64_t DataFiles::opens() const {
  MutexLock lock(mu_);
  return opens_;
}

}  // namespace zero::checkpoint
