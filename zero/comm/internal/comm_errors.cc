#include "zero/comm/internal/comm_errors.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zero {

std::string RankList(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) text += ",";
    absl::StrAppend(&text, ranks[i]);
    if (j > i) absl::StrAppend(&text, "-", ranks[j]);
    i = j + 1;
  }
  return text;
}

std::string GroupRanks(absl::Span<const std::string> label_by_rank) {
  std::vector<std::string> labels;               // in order of first appearance
  std::vector<std::vector<int>> ranks_by_label;  // parallel to labels
  for (int r = 0; r < static_cast<int>(label_by_rank.size()); ++r) {
    auto it = std::find(labels.begin(), labels.end(), label_by_rank[r]);
    if (it == labels.end()) {
      labels.push_back(label_by_rank[r]);
      ranks_by_label.emplace_back();
      it = labels.end() - 1;
    }
    ranks_by_label[it - labels.begin()].push_back(r);
  }
  std::string text;
  for (size_t i = 0; i < labels.size(); ++i) {
    absl::StrAppend(&text, i > 0 ? "; " : "", RankList(ranks_by_label[i]), " ", labels[i]);
  }
  return text;
}

absl::Status MismatchError(uint64_t seq, absl::Span<const std::optional<CollectiveCall>> calls) {
  std::vector<std::string> labels;
  labels.reserve(calls.size());
  for (const auto& call : calls) labels.push_back(call ? call->ToString() : "not arrived");
  return absl::FailedPreconditionError(
      absl::StrFormat("collective #%d differs: %s", seq, GroupRanks(labels)));
}

absl::Status RankFailedError(uint64_t seq, int rank, const absl::Status& cause) {
  return absl::FailedPreconditionError(
      absl::StrFormat("collective #%d failed on rank %d: %s", seq, rank, cause.message()));
}

}  // namespace zero
