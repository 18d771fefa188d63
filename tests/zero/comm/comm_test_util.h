// Helpers for communicator tests: one thread per rank, typed buffers as
// bytes, and the reference results the contracts promise.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "base/dtype.h"
#include "zero/comm/collective.h"
#include "zero/comm/communicator.h"

namespace zero::testing {

using Group = std::vector<std::unique_ptr<Communicator>>;
using Bytes = std::vector<uint8_t>;

// Runs fn(rank, comm) on one thread per rank; returns each rank's status.
// Ranks whose communicator is null are skipped (OK).
inline std::vector<absl::Status> RunRanks(
    Group& group, const std::function<absl::Status(int, Communicator&)>& fn) {
  std::vector<absl::Status> results(group.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < group.size(); ++r) {
    if (group[r] == nullptr) continue;
    threads.emplace_back([&, r] { results[r] = fn(static_cast<int>(r), *group[r]); });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// Holds the streams that run Wait() until Open(), so work queued behind it
// has certainly not run while it is closed: tests of asynchrony need no
// timing. Wait gives up after `patience` (and expired() says so), so code
// that wrongly waits for the held work fails the test instead of hanging it.
class Gate {
 public:
  explicit Gate(std::chrono::milliseconds patience = std::chrono::seconds(10))
      : patience_(patience) {}
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, patience_, [this] { return open_; })) expired_ = true;
  }
  bool expired() const {
    std::lock_guard lock(mu_);
    return expired_;
  }

 private:
  const std::chrono::milliseconds patience_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;     // guarded by mu_
  bool expired_ = false;  // guarded by mu_
};

inline float Decode(DType dtype, const uint8_t* p) {
  switch (dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kBF16: {
      bf16 h;
      std::memcpy(&h, p, 2);
      return BF16ToFloat(h);
    }
    case DType::kF16: {
      f16 h;
      std::memcpy(&h, p, 2);
      return F16ToFloat(h);
    }
  }
  return 0;
}

inline void Encode(DType dtype, float value, uint8_t* p) {
  switch (dtype) {
    case DType::kF32: std::memcpy(p, &value, 4); return;
    case DType::kBF16: {
      bf16 h = FloatToBF16(value);
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::kF16: {
      f16 h = FloatToF16(value);
      std::memcpy(p, &h, 2);
      return;
    }
  }
}

// `count` elements that differ by rank, element and salt; exact in every
// dtype (multiples of 1/4 up to 12), so sums of up to 8 are exact in fp32.
inline Bytes Pattern(DType dtype, int rank, size_t count, int salt = 0) {
  Bytes out(count * SizeOf(dtype));
  for (size_t i = 0; i < count; ++i) {
    const int v = static_cast<int>((rank * 131 + i * 17 + salt * 7) % 97) - 48;
    Encode(dtype, v * 0.25f, out.data() + i * SizeOf(dtype));
  }
  return out;
}

// The contract: fp32, rank order, rounded once; avg divides the sum by N.
inline Bytes Reference(DType dtype, ReduceOp op, const std::vector<Bytes>& inputs, size_t begin,
                       size_t count) {
  const size_t e = SizeOf(dtype);
  Bytes out(count * e);
  for (size_t i = 0; i < count; ++i) {
    float acc = Decode(dtype, inputs[0].data() + (begin + i) * e);
    for (size_t r = 1; r < inputs.size(); ++r) {
      const float x = Decode(dtype, inputs[r].data() + (begin + i) * e);
      acc = op == ReduceOp::kMax ? (x > acc ? x : acc) : acc + x;
    }
    if (op == ReduceOp::kAvg) acc /= static_cast<float>(inputs.size());
    Encode(dtype, acc, out.data() + i * e);
  }
  return out;
}

inline Bytes Slice(const Bytes& bytes, DType dtype, size_t begin, size_t count) {
  const size_t e = SizeOf(dtype);
  return Bytes(bytes.begin() + begin * e, bytes.begin() + (begin + count) * e);
}

}  // namespace zero::testing
