// Progress of a sweep on stderr: a bar redrawn in place on a terminal,
// plain lines otherwise (logs, CI); nothing for a single run.
#pragma once

#include <ostream>
#include <string>

namespace zero::footprint {

class Progress {
 public:
  Progress(std::ostream& err, bool tty, int total) : err_(err), tty_(tty), total_(total) {}
  ~Progress() { Finish(); }

  // Before run `index` (0-based) starts.
  void Begin(int index, const std::string& label);
  // Clears the bar (idempotent).
  void Finish();

 private:
  std::ostream& err_;
  const bool tty_;
  const int total_;
  bool drawn_ = false;
};

}  // namespace zero::footprint
