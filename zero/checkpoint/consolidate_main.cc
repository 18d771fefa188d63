// consolidate CHECKPOINT OUTPUT.safetensors
//
// Writes the fp32 master weights of a zero checkpoint (a root folder with
// `latest`, or a step folder) as one safetensors file. Exit status 0 and a
// summary line on success; 2 and one line on stderr for bad input.
#include <cstdio>
#include <string>

#include "absl/strings/str_replace.h"
#include "zero/checkpoint/consolidate.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consolidate CHECKPOINT OUTPUT.safetensors\n");
    return 2;
  }
  absl::StatusOr<zero::checkpoint::ConsolidateSummary> summary =
      zero::checkpoint::ConsolidateToSafetensors(argv[1], argv[2]);
  if (!summary.ok()) {
    const std::string line =
        absl::StrReplaceAll(summary.status().message(), {{"\n", " "}, {"\r", " "}});
    std::fprintf(stderr, "consolidate: %s\n", line.c_str());
    return 2;
  }
  std::printf("consolidate: %d parameters, %llu fp32 elements at step %lld from '%s' to '%s'\n",
              summary->params, static_cast<unsigned long long>(summary->elements),
              static_cast<long long>(summary->steps), summary->checkpoint.c_str(), argv[2]);
  return 0;
}
