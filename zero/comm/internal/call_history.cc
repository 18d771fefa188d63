#include "zero/comm/internal/call_history.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"
#include "zero/comm/internal/comm_errors.h"

namespace zero {

// Layout: word 0 = kind | dtype << 8 | op << 16 | valid << 24 | root << 32,
// word 1 = count.
PackedCall Pack(const CollectiveCall& call, bool valid) {
  PackedCall packed;
  packed.words[0] = uint64_t{static_cast<uint8_t>(call.kind)} |
                    uint64_t{static_cast<uint8_t>(call.dtype)} << 8 |
                    uint64_t{static_cast<uint8_t>(call.op)} << 16 | uint64_t{valid} << 24 |
                    uint64_t{static_cast<uint32_t>(call.root)} << 32;
  packed.words[1] = call.count;
  return packed;
}

CollectiveCall Unpack(const PackedCall& packed, bool* valid) {
  const uint64_t w = packed.words[0];
  if (valid != nullptr) *valid = ((w >> 24) & 1) != 0;
  return {.kind = static_cast<CollectiveKind>(w & 0xFF),
          .dtype = static_cast<DType>((w >> 8) & 0xFF),
          .op = static_cast<ReduceOp>((w >> 16) & 0xFF),
          .root = static_cast<int>(static_cast<uint32_t>(w >> 32)),
          .count = packed.words[1]};
}

CallHistory::CallHistory(size_t window) : ring_(window) {}

namespace {

// splitmix64's finalizer: a cheap mix with full avalanche.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t CallHistory::Record(const CollectiveCall& call, bool valid) {
  const PackedCall packed = Pack(call, valid);
  ++seq_;
  // Order matters: Mix(previous) makes the fingerprint a hash of the sequence.
  fingerprint_ = Mix(Mix(fingerprint_ ^ packed.words[0]) ^ packed.words[1]);
  last_ = call;
  if (!ring_.empty()) ring_[(seq_ - 1) % ring_.size()] = packed;
  return seq_;
}

std::optional<CollectiveCall> CallHistory::last() const { return last_; }

std::vector<PackedCall> CallHistory::Window() const {
  const size_t kept = seq_ < ring_.size() ? static_cast<size_t>(seq_) : ring_.size();
  std::vector<PackedCall> window;
  window.reserve(kept);
  for (uint64_t n = seq_ - kept + 1; n <= seq_; ++n)
    window.push_back(ring_[(n - 1) % ring_.size()]);
  return window;
}

std::vector<uint64_t> Serialize(const CallHistory& history, size_t window) {
  std::vector<uint64_t> words(2 + 2 * window, 0);
  words[0] = history.seq();
  words[1] = history.fingerprint();
  const std::vector<PackedCall> kept = history.Window();
  const size_t n = std::min(kept.size(), window);
  for (size_t i = 0; i < n; ++i) {
    const PackedCall& call = kept[kept.size() - n + i];
    words[2 + 2 * i] = call.words[0];
    words[3 + 2 * i] = call.words[1];
  }
  return words;
}

HistorySummary Deserialize(absl::Span<const uint64_t> words) {
  HistorySummary summary;
  if (words.size() < 2) return summary;
  summary.seq = words[0];
  summary.fingerprint = words[1];
  const size_t window = (words.size() - 2) / 2;
  const size_t n = summary.seq < window ? static_cast<size_t>(summary.seq) : window;
  for (size_t i = 0; i < n; ++i) summary.window.push_back({{words[2 + 2 * i], words[3 + 2 * i]}});
  return summary;
}

namespace {

// The first kept call number where some rank's call is invalid or differs.
absl::Status FirstDifference(absl::Span<const HistorySummary> ranks) {
  uint64_t lo = 1, hi = UINT64_MAX;
  for (const HistorySummary& r : ranks) {
    lo = std::max<uint64_t>(lo, r.seq - r.window.size() + 1);
    hi = std::min(hi, r.seq);
  }
  const int world = static_cast<int>(ranks.size());
  for (uint64_t n = lo; n <= hi; ++n) {
    std::vector<std::optional<CollectiveCall>> calls(world);
    for (int r = 0; r < world; ++r) {
      const HistorySummary& h = ranks[r];
      bool valid = true;
      calls[r] = Unpack(h.window[n - (h.seq - h.window.size() + 1)], &valid);
      if (!valid) {
        return RankFailedError(
            n, r, absl::InvalidArgumentError("invalid arguments to " + calls[r]->ToString()));
      }
    }
    for (int r = 1; r < world; ++r) {
      if (calls[r] != calls[0]) return MismatchError(n, calls);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CompareHistories(absl::Span<const HistorySummary> ranks) {
  if (ranks.empty()) return absl::OkStatus();
  const bool same = std::all_of(ranks.begin(), ranks.end(), [&](const HistorySummary& r) {
    return r.seq == ranks[0].seq && r.fingerprint == ranks[0].fingerprint;
  });
  if (same) return absl::OkStatus();
  if (absl::Status status = FirstDifference(ranks); !status.ok()) return status;
  std::vector<std::string> where;
  for (const HistorySummary& r : ranks) {
    where.push_back(absl::StrFormat("at #%d (fingerprint %016x)", r.seq, r.fingerprint));
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "collective sequences differ before the calls kept for checking: %s", GroupRanks(where)));
}

}  // namespace zero
