// The element-wise executor on a card against the CPU's results. Compiled
// everywhere; the comparisons run only where a card is present (never on
// CI). Maps must match the CPU bit for bit (NaNs: both NaN, since a card's
// add returns its canonical NaN); the card's sum of squares is its own fixed
// order (cuda/elementwise_kernels.h): the same bits on every run and for any
// alignment, close to the host's.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "compute/cuda/launch.h"
#include "compute/elementwise_executor.h"
#include "compute/elementwise_rules.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "memory/host_stream.h"
#include "tests/compute/elementwise_reference.h"
#include "tests/optimizers/test_util.h"

namespace zero::testing {
namespace {

constexpr DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

TEST(ElementwiseCudaTest, WithoutACardCallsFailCleanly) {
  if (cuda::DeviceCount() > 0) GTEST_SKIP() << "a card is present";
  HostStream stream(0);
  std::vector<float> data(16, 1.0f);
  const absl::Status s = ElementwiseExecutor::For(DeviceKind::kCuda)
                             .Fill(data.data(), 2.0f, data.size(), DType::kF32, &stream);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_EQ(data, std::vector<float>(16, 1.0f));
}

// Equal bytes, or both NaN, element by element.
::testing::AssertionResult SameOrBothNan(const std::vector<uint8_t>& a,
                                         const std::vector<uint8_t>& b, DType dtype) {
  const size_t size = SizeOf(dtype);
  for (size_t i = 0; i < a.size() / size; ++i) {
    if (std::memcmp(&a[i * size], &b[i * size], size) == 0) continue;
    if (std::isnan(DecodeAt(a.data(), dtype, i)) && std::isnan(DecodeAt(b.data(), dtype, i))) {
      continue;
    }
    return ::testing::AssertionFailure() << "first difference at element " << i;
  }
  return ::testing::AssertionSuccess();
}

class ElementwiseCardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no card";
    absl::StatusOr<std::unique_ptr<DeviceSystem>> system =
        DeviceSystem::Create({.kind = DeviceSpec::Kind::kCuda});
    ASSERT_TRUE(system.ok()) << system.status();
    system_ = std::move(system).value();
    stream_ = system_->default_stream(0);
  }
  void TearDown() override {
    if (!system_) return;
    EXPECT_TRUE(stream_->Synchronize().ok());
    for (auto [ptr, bytes] : blocks_) EXPECT_TRUE(system_->Deallocate(ptr, bytes, stream_).ok());
  }

  // A device copy of `bytes`, `shift` bytes into its block.
  uint8_t* Upload(const void* bytes, size_t size, size_t shift = 0) {
    void* block = system_->pool(0).Allocate(size + shift + 16, Tag::kOther, stream_).value();
    blocks_.push_back({block, size + shift + 16});
    uint8_t* at = static_cast<uint8_t*>(block) + shift;
    EXPECT_TRUE(stream_->Copy(at, bytes, size).ok());
    return at;
  }
  std::vector<uint8_t> Download(const void* device, size_t size) {
    std::vector<uint8_t> out(size);
    EXPECT_TRUE(stream_->Copy(out.data(), device, size).ok());
    EXPECT_TRUE(stream_->Synchronize().ok());
    return out;
  }

  const ElementwiseExecutor& card() const { return ElementwiseExecutor::For(DeviceKind::kCuda); }

  std::unique_ptr<DeviceSystem> system_;
  Stream* stream_ = nullptr;
  std::vector<std::pair<void*, size_t>> blocks_;
};

TEST_F(ElementwiseCardTest, MapsMatchTheCpu) {
  const float factor = 0.40625f;
  const float* device_factor = reinterpret_cast<const float*>(Upload(&factor, sizeof factor));
  for (int k = 0; k < kNumMapKinds; ++k) {
    const auto kind = static_cast<ElementwiseKind>(k);
    for (DType dtype : kDTypes) {
      for (size_t n : {1, 7, 8, 9, 1000, 100003}) {
        for (size_t offset : {0, 1}) {  // 16-byte packs, and element loads
          MapBuffers b(kind, dtype, n, offset, 11);
          const std::vector<uint8_t> expected =
              b.Expected(kind == ElementwiseKind::kFill ? -2.5f : factor);
          const ElementwiseOp host = b.Op(-2.5f, nullptr);
          ElementwiseOp op = host;
          uint8_t* dst = Upload(b.dst.data(), b.dst.size());
          op.dst = dst + (static_cast<uint8_t*>(host.dst) - b.dst.data());
          if (!b.src.empty()) {
            const uint8_t* src = Upload(b.src.data(), b.src.size());
            op.src = src + (static_cast<const uint8_t*>(host.src) - b.src.data());
          }
          op.factor = device_factor;
          ASSERT_TRUE(card().Run(op, stream_).ok());
          const DType out = kind == ElementwiseKind::kWiden ? DType::kF32 : dtype;
          EXPECT_TRUE(SameOrBothNan(Download(dst, b.dst.size()), expected, out))
              << Name(kind) << " " << Name(dtype) << " n=" << n << " offset=" << offset;
        }
      }
    }
  }
}

TEST_F(ElementwiseCardTest, SumOfSquaresIsDeterministicAndCloseToTheHosts) {
  for (DType dtype : kDTypes) {
    for (size_t n : {1, 9, 100003, 5000011}) {
      const std::vector<uint8_t> x = Encode(RandomFloats(n, 3, 2.0f), dtype);
      double* sums = reinterpret_cast<double*>(Upload(std::vector<double>(3, 0.0).data(), 24));
      // Twice from aligned copies, once from a copy one element off.
      for (int k = 0; k < 3; ++k) {
        const uint8_t* src = Upload(x.data(), x.size(), k == 2 ? SizeOf(dtype) : 0);
        ASSERT_TRUE(card().SumOfSquares(&sums[k], src, n, dtype, stream_).ok());
      }
      const std::vector<uint8_t> got = Download(sums, 24);
      double s[3];
      std::memcpy(s, got.data(), 24);
      EXPECT_EQ(std::memcmp(&s[0], &s[1], 8), 0) << Name(dtype) << " n=" << n;
      EXPECT_EQ(std::memcmp(&s[0], &s[2], 8), 0) << Name(dtype) << " n=" << n << " misaligned";
      const double host = ReferenceSumOfSquares(x.data(), dtype, n);
      EXPECT_NEAR(s[0], host, 1e-12 * host) << Name(dtype) << " n=" << n;
    }
  }
}

TEST_F(ElementwiseCardTest, FlagFindsInfAndNanAtFirstMiddleAndLast) {
  constexpr size_t kN = 100003;
  for (DType dtype : kDTypes) {
    for (size_t at : {size_t{0}, kN / 2, kN - 1}) {
      std::vector<float> values(kN, 1.0f);
      values[at] = at == 0 ? std::numeric_limits<float>::quiet_NaN()
                           : std::numeric_limits<float>::infinity();
      const std::vector<uint8_t> x = Encode(values, dtype);
      const int32_t zero = 0;
      int32_t* flag = reinterpret_cast<int32_t*>(Upload(&zero, 4));
      ASSERT_TRUE(card().FlagNonFinite(flag, Upload(x.data(), x.size()), kN, dtype, stream_).ok());
      EXPECT_EQ(Download(flag, 4)[0], 1) << Name(dtype) << " at " << at;
    }
  }
}

// The step's scalars (norm, clipped grad scale) computed by the card's
// one-thread kernel equal the host rule's bit for bit: explicitly rounded
// operations, so nvcc cannot fuse them (issue 10's device-resident scalars).
TEST_F(ElementwiseCardTest, StepScalarsMatchTheHostRule) {
  const std::vector<double> partials = {3.25e-3, 1.0 / 3.0, 7.5e-9, 2.0};
  for (double max_norm : {0.0, 0.01, 1e6}) {
    for (float mean_scale : {1.0f, 0.125f, 1.0f / 24.0f}) {
      const double* device_partials =
          reinterpret_cast<const double*>(Upload(partials.data(), partials.size() * 8));
      const StepScalars zero_scalars{};
      auto* scalars = reinterpret_cast<StepScalars*>(Upload(&zero_scalars, sizeof zero_scalars));
      ASSERT_TRUE(card().ComputeStepScalars(scalars, device_partials, partials.size(), mean_scale,
                                            max_norm, stream_)
                      .ok());
      const std::vector<uint8_t> got = Download(scalars, sizeof(StepScalars));
      StepScalars card_scalars;
      std::memcpy(&card_scalars, got.data(), sizeof card_scalars);
      const StepScalars host = StepScalarsOf(partials.data(), partials.size(), mean_scale, max_norm);
      EXPECT_EQ(std::memcmp(&card_scalars.norm, &host.norm, 8), 0)
          << "max_norm " << max_norm << " scale " << mean_scale;
      EXPECT_EQ(std::memcmp(&card_scalars.grad_scale, &host.grad_scale, 4), 0)
          << "max_norm " << max_norm << " scale " << mean_scale;
    }
  }
}

// The card stream's CopyFromPageable (staged through recycled pinned
// buffers, no host wait): the caller may overwrite its buffer at once, and
// the copies land in stream order, busy stream or idle.
TEST_F(ElementwiseCardTest, CopyFromPageableLetsTheCallerReuseItsBuffer) {
  constexpr size_t kN = 1 << 20;
  void* block = system_->pool(0).Allocate(kN * 8, Tag::kOther, stream_).value();
  blocks_.push_back({block, kN * 8});
  auto* dst = static_cast<uint8_t*>(block);
  std::vector<uint8_t> pageable(kN);
  for (int round = 0; round < 8; ++round) {
    std::memset(pageable.data(), round + 1, kN);
    ASSERT_TRUE(stream_->CopyFromPageable(dst + (round % 8) * kN, pageable.data(), kN).ok());
    std::memset(pageable.data(), 0xEE, kN);  // the caller's buffer is its own again
  }
  for (int round = 0; round < 8; ++round) {
    const std::vector<uint8_t> got = Download(dst + round * kN, kN);
    for (size_t i = 0; i < kN; i += 4099) {
      ASSERT_EQ(got[i], round + 1) << "round " << round << " byte " << i;
    }
  }
}

// Card memory of another allocator (cudaMalloc here; torch's tensors from
// Python) goes through Copy in stream order, not through the host (the
// caller says it is card memory: no pointer query): the bytes arrive,
// behind work already on the stream.
TEST_F(ElementwiseCardTest, CopyReadsForeignCardMemory) {
  constexpr size_t kN = 1 << 20;
  void* foreign = nullptr;
  ASSERT_EQ(cudaMalloc(&foreign, kN), cudaSuccess);
  ASSERT_EQ(cudaMemset(foreign, 7, kN), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  void* block = system_->pool(0).Allocate(kN, Tag::kOther, stream_).value();
  blocks_.push_back({block, kN});
  ASSERT_TRUE(stream_->Fill(block, 1, kN).ok());
  ASSERT_TRUE(stream_->Copy(block, foreign, kN).ok());
  const std::vector<uint8_t> got = Download(static_cast<uint8_t*>(block), kN);
  cudaFree(foreign);
  for (size_t i = 0; i < kN; i += 4099) ASSERT_EQ(got[i], 7) << "byte " << i;
}

}  // namespace
}  // namespace zero::testing
