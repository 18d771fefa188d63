// One rank's sequence of collectives: how many it issued, a running
// fingerprint of all of them, and the last few calls. Ranks compare these to
// find the first call where their programs diverged (the cause of most ZeRO
// hangs). Not thread-safe: owned by one communicator.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "zero/comm/collective.h"

namespace zero {

// A call as 16 bytes, to ship between ranks (NCCL's sequence check).
// `valid` is false when the rank's own arguments failed validation.
struct PackedCall {
  std::array<uint64_t, 2> words{};
  bool operator==(const PackedCall&) const = default;
};
PackedCall Pack(const CollectiveCall& call, bool valid = true);
CollectiveCall Unpack(const PackedCall& packed, bool* valid = nullptr);

class CallHistory {
 public:
  // Keeps the last `window` calls (0: none).
  explicit CallHistory(size_t window = 0);

  // Appends a call; returns its number (1 for the first).
  uint64_t Record(const CollectiveCall& call, bool valid = true);

  uint64_t seq() const { return seq_; }
  // Equal on two ranks (with equal seq) iff their sequences are equal, up to
  // 64-bit hash collisions.
  uint64_t fingerprint() const { return fingerprint_; }
  std::optional<CollectiveCall> last() const;
  // The kept calls, oldest first: numbers seq()-size()+1 ... seq().
  std::vector<PackedCall> Window() const;

 private:
  uint64_t seq_ = 0;
  uint64_t fingerprint_ = 0;
  std::optional<CollectiveCall> last_;
  std::vector<PackedCall> ring_;  // slot (n - 1) % size holds call n
};

// A history as ranks exchange it: seq, fingerprint and the kept calls.
struct HistorySummary {
  uint64_t seq = 0;
  uint64_t fingerprint = 0;
  std::vector<PackedCall> window;  // calls seq-size+1 ... seq
};

// Fixed size for a given window: 2 + 2 * window words (unused calls zero).
std::vector<uint64_t> Serialize(const CallHistory& history, size_t window);
HistorySummary Deserialize(absl::Span<const uint64_t> words);

// OK when every rank has the same sequence. Else FailedPrecondition naming
// the first call, among those kept by all, where a rank's call was invalid
// or differs (MismatchError's words); when the kept calls agree, it says the
// sequences differ earlier, or that ranks are at different call numbers.
absl::Status CompareHistories(absl::Span<const HistorySummary> ranks);

}  // namespace zero
