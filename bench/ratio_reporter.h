// A console reporter that also remembers each run's time per iteration, so a
// benchmark's main can print ratios of runs measured in the same process.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"

namespace zero {

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Iteration && run.iterations > 0) {
        seconds_[run.benchmark_name()] = run.real_accumulated_time / run.iterations;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  // Seconds per iteration of the named run; 0 when it did not run.
  double seconds(const std::string& name) const {
    auto it = seconds_.find(name);
    return it == seconds_.end() ? 0.0 : it->second;
  }

 private:
  std::map<std::string, double> seconds_;
};

}  // namespace zero
