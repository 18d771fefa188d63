// What every benchmark's main shares:
//  - RatioReporter, a console reporter that also remembers each run's time
//    per iteration, so main can print ratios of runs measured in the same
//    process, and each run that stopped with an error;
//  - Goals, the exit status: 1 when a run stopped with an error, or a goal
//    the benchmark states was missed (unless --report_only), so a script can
//    tell; 0 otherwise;
//  - RunWithGoals, the main that puts them together.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"

namespace zero {

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred) {
        errors_.push_back(run.benchmark_name() + ": " + run.error_message);
      } else if (run.run_type == Run::RT_Iteration && run.iterations > 0) {
        seconds_[run.benchmark_name()] = run.real_accumulated_time / run.iterations;
        cpu_rounds_[run.benchmark_name()].push_back(run.cpu_accumulated_time / run.iterations);
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  // Seconds per iteration of the named run; 0 when it did not run.
  double seconds(const std::string& name) const {
    auto it = seconds_.find(name);
    return it == seconds_.end() ? 0.0 : it->second;
  }
  // The median over the repetitions (--benchmark_repetitions) of the named
  // run's CPU seconds per iteration; 0 when it did not run.
  double cpu_median(const std::string& name) const {
    auto it = cpu_rounds_.find(name);
    if (it == cpu_rounds_.end() || it->second.empty()) return 0.0;
    std::vector<double> rounds = it->second;
    std::sort(rounds.begin(), rounds.end());
    const size_t n = rounds.size();
    return n % 2 == 1 ? rounds[n / 2] : (rounds[n / 2 - 1] + rounds[n / 2]) / 2;
  }
  // "name: message" of each run that stopped with an error.
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::map<std::string, double> seconds_;
  std::map<std::string, std::vector<double>> cpu_rounds_;
  std::vector<std::string> errors_;
};

class Goals {
 public:
  // Takes --report_only out of argv; call before benchmark::Initialize.
  Goals(int* argc, char** argv) {
    int kept = 1;
    for (int i = 1; i < *argc; ++i) {
      if (std::strcmp(argv[i], "--report_only") == 0) {
        report_only_ = true;
      } else {
        argv[kept++] = argv[i];
      }
    }
    *argc = kept;
  }

  // Records a stated goal; prints it when missed.
  void Check(bool met, const std::string& what) {
    if (met) return;
    missed_.push_back(what);
    std::printf("GOAL MISSED: %s\n", what.c_str());
  }
  // An error outside the benchmark runs (a replay that failed, ...).
  void Error(const std::string& what) { errors_.push_back(what); }

  // Prints a closing line and returns main's exit status. Errors always fail;
  // missed goals fail unless --report_only.
  int ExitCode(const RatioReporter* reporter = nullptr) {
    if (reporter != nullptr) {
      errors_.insert(errors_.begin(), reporter->errors().begin(), reporter->errors().end());
    }
    for (const std::string& e : errors_) std::printf("ERROR: %s\n", e.c_str());
    const bool fail_goals = !missed_.empty() && !report_only_;
    std::printf("\n%zu error(s), %zu goal(s) missed%s\n", errors_.size(), missed_.size(),
                !missed_.empty() && report_only_ ? " (--report_only: not a failure)" : "");
    return errors_.empty() && !fail_goals ? 0 : 1;
  }

 private:
  bool report_only_ = false;
  std::vector<std::string> missed_;
  std::vector<std::string> errors_;
};

// A benchmark's main: takes --report_only, calls register_runs() (for runs
// BENCHMARK does not register), runs the benchmarks, then
// summarize(reporter, goals), which prints what they measured and checks
// the goals the benchmark states; returns the exit status.
template <class Register, class Summarize>
int RunWithGoals(int argc, char** argv, Register register_runs, Summarize summarize) {
  Goals goals(&argc, argv);
  benchmark::Initialize(&argc, argv);
  register_runs();
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  summarize(reporter, goals);
  return goals.ExitCode(&reporter);
}

// The same for a benchmark whose runs BENCHMARK registers.
template <class Summarize>
int RunWithGoals(int argc, char** argv, Summarize summarize) {
  return RunWithGoals(argc, argv, [] {}, summarize);
}

}  // namespace zero
