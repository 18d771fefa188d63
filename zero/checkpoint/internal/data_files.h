// The data files of one checkpoint, each opened and checked (its size and
// header: CheckDataFile in verified_reader.h) whenever it is opened, at most
// `max_open` of them open at once: the least recently used is closed first,
// and one still being read stays open until its reader lets go. Loading or
// consolidating a checkpoint saved by thousands of ranks (one file each, two
// descriptors per DirectFile) then stays far below the process's descriptor
// limit (1024 by default) even with 8 ranks loading in one process.
//
// Thread-safe. `manifest` must outlive the DataFiles.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/direct_file.h"
#include "base/mutex.h"
#include "zero/checkpoint/internal/manifest.h"

namespace zero::checkpoint {

class DataFiles {
 public:
  // Few are needed: readers go through the files in order.
  static constexpr int kDefaultMaxOpen = 16;

  DataFiles(std::string folder, const Manifest& manifest, int max_open = kDefaultMaxOpen);

  // Data file `index`, open and checked. NotFound for a missing file;
  // DataLoss naming it for a wrong size or header.
  absl::StatusOr<std::shared_ptr<DirectFile>> Get(int index);

  int open_now() const;   // held here (readers may hold more a while)
  uint64_t opens() const;  // files opened (and checked) so far

 private:
  absl::StatusOr<std::shared_ptr<DirectFile>> OpenChecked(int index) const;

  const std::string folder_;
  const Manifest& manifest_;
  const int max_open_;

  mutable Mutex mu_;
  // Most recently used first.
  std::list<std::pair<int, std::shared_ptr<DirectFile>>> open_ ABSL_GUARDED_BY(mu_);
  uint64_t opens_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace zero::checkpoint
