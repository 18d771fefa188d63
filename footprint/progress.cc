#include "footprint/progress.h"

#include "absl/strings/str_format.h"

namespace zero::footprint {

void Progress::Begin(int index, const std::string& label) {
  if (total_ <= 1) return;
  if (!tty_) {
    err_ << absl::StrFormat("footprint: [%d/%d] %s\n", index + 1, total_, label);
    return;
  }
  constexpr int kWidth = 30;
  const int filled = kWidth * index / total_;
  err_ << absl::StrFormat("\r\x1b[K[%s%s] %d/%d %s", std::string(filled, '#'),
                          std::string(kWidth - filled, '.'), index + 1, total_, label)
       << std::flush;
  drawn_ = true;
}

void Progress::Finish() {
  if (!drawn_) return;
  err_ << "\r\x1b[K" << std::flush;
  drawn_ = false;
}

}  // namespace zero::footprint
