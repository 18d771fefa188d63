// The element-wise executor on host streams (ordered, on the stream's
// thread), on meta devices (nothing), and its argument checks. The
// arithmetic itself is elementwise_test.cc's; here each operation is checked
// once more against the reference, through the stream.
#include "compute/elementwise_executor.h"

#include <cmath>
#include <cstring>
#include <latch>
#include <limits>
#include <vector>

#include "base/units.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "memory/host_stream.h"
#include "tests/compute/elementwise_reference.h"
#include "tests/optimizers/test_util.h"

namespace zero::testing {
namespace {

constexpr DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

const ElementwiseExecutor& Host() { return ElementwiseExecutor::For(DeviceKind::kHost); }

// Runs one map through the executor's typed method on `stream`.
absl::Status RunMap(const ElementwiseExecutor& ex, const ElementwiseOp& op, Stream* stream) {
  switch (op.kind) {
    case ElementwiseKind::kWiden:
      return ex.Widen(static_cast<float*>(op.dst), op.src, op.count, op.dtype, stream);
    case ElementwiseKind::kNarrow:
      return ex.Narrow(op.dst, static_cast<const float*>(op.src), op.count, op.dtype, stream);
    case ElementwiseKind::kAccumulate:
      return ex.AccumulateNarrow(op.dst, static_cast<const float*>(op.src), op.count, op.dtype,
                                 stream);
    case ElementwiseKind::kFill: return ex.Fill(op.dst, op.value, op.count, op.dtype, stream);
    default: return ex.Scale(op.dst, op.factor, op.count, op.dtype, stream);
  }
}

TEST(ElementwiseExecutorTest, EveryMapOnAHostStreamMatchesTheReference) {
  HostStream stream(0);
  const float factor = 0.40625f;
  for (int k = 0; k < kNumMapKinds; ++k) {
    const auto kind = static_cast<ElementwiseKind>(k);
    for (DType dtype : kDTypes) {
      for (size_t n : {1, 13, 100003}) {  // the last takes the parallel path
        MapBuffers b(kind, dtype, n, 1, 5);
        const std::vector<uint8_t> expected =
            b.Expected(kind == ElementwiseKind::kFill ? -2.5f : factor);
        ASSERT_TRUE(RunMap(Host(), b.Op(-2.5f, &factor), &stream).ok());
        ASSERT_TRUE(stream.Synchronize().ok());
        EXPECT_TRUE(SameBits(b.dst, expected)) << Name(kind) << " " << Name(dtype) << " " << n;
      }
    }
  }
}

// The factor is read when the scale runs, after the fill before it on the
// same stream wrote it; the stream is held until both are enqueued, so
// reading it at enqueue time would see the old value.
TEST(ElementwiseExecutorTest, ScaleReadsAFactorAnEarlierOperationWrote) {
  HostStream stream(0);
  std::latch release(1);
  ASSERT_TRUE(stream.Enqueue([&] { release.wait(); }).ok());
  float factor = 3.0f;
  std::vector<float> data(1000, 2.0f);
  ASSERT_TRUE(Host().Fill(&factor, 0.5f, 1, DType::kF32, &stream).ok());
  ASSERT_TRUE(Host().Scale(data.data(), &factor, data.size(), DType::kF32, &stream).ok());
  release.count_down();
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_EQ(factor, 0.5f);
  for (float v : data) ASSERT_EQ(v, 1.0f);
}

// Spans summed into one zeroed scalar add their totals in call order, as the
// engine's norm does unit by unit.
TEST(ElementwiseExecutorTest, SumOfSquaresAddsEachSpansTotal) {
  HostStream stream(0);
  for (DType dtype : kDTypes) {
    const std::vector<uint8_t> a = Encode(RandomFloats(100003, 1, 3.0f), dtype);
    const std::vector<uint8_t> b = Encode(RandomFloats(777, 2, 3.0f), dtype);
    double sum = 0;
    ASSERT_TRUE(Host().SumOfSquares(&sum, a.data(), 100003, dtype, &stream).ok());
    ASSERT_TRUE(Host().SumOfSquares(&sum, b.data(), 777, dtype, &stream).ok());
    ASSERT_TRUE(stream.Synchronize().ok());
    const double expected = ReferenceSumOfSquares(a.data(), dtype, 100003) +
                            ReferenceSumOfSquares(b.data(), dtype, 777);
    EXPECT_EQ(std::memcmp(&sum, &expected, sizeof sum), 0) << Name(dtype);
  }
}

TEST(ElementwiseExecutorTest, FlagFindsInfAndNanAtFirstMiddleAndLast) {
  HostStream stream(0);
  constexpr size_t kN = 100003;  // parallel path
  for (DType dtype : kDTypes) {
    for (float bad : {std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN()}) {
      for (size_t at : {size_t{0}, kN / 2, kN - 1}) {
        std::vector<float> values(kN, -1.0f);
        values[at] = bad;
        const std::vector<uint8_t> src = Encode(values, dtype);
        int32_t flag = 0;
        ASSERT_TRUE(Host().FlagNonFinite(&flag, src.data(), kN, dtype, &stream).ok());
        ASSERT_TRUE(stream.Synchronize().ok());
        EXPECT_EQ(flag, 1) << Name(dtype) << " " << bad << " at " << at;
      }
    }
    const std::vector<uint8_t> clean = Encode(std::vector<float>(kN, 65504.0f), dtype);
    int32_t flag = 0;
    ASSERT_TRUE(Host().FlagNonFinite(&flag, clean.data(), kN, dtype, &stream).ok());
    ASSERT_TRUE(stream.Synchronize().ok());
    EXPECT_EQ(flag, 0) << Name(dtype);
  }
}

// torch's clip_grad_norm_ on the mean gradient, written out in the engine's
// old host code: partials added in rank order, fp64, rounded once to fp32.
StepScalars ExpectedStepScalars(const std::vector<double>& partials, float mean, double max_norm) {
  double total = 0;
  for (double p : partials) total += p;
  const double norm = std::sqrt(total) * mean;
  const double coef = max_norm / (norm + 1e-6);
  // torch.clamp(coef, max=1.0): a NaN coefficient stays NaN.
  const float scale = max_norm > 0 && !(coef >= 1.0) ? static_cast<float>(mean * coef) : mean;
  return {.norm = norm, .grad_scale = scale};
}

// The clip coefficient and the scale are computed on the stream from sums
// an earlier operation wrote (the stream is held until both are enqueued).
TEST(ElementwiseExecutorTest, StepScalarsClipAsTorchFromPartialsWrittenEarlier) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const float mean = 1.0f / 24;  // 8 ranks x 3 micro-batches
  struct Case {
    std::vector<double> partials;
    double max_norm;
  };
  const std::vector<Case> cases = {
      {{1e6, 3e5, 7.25, 0.1}, 1.0},   // clipped
      {{1e6, 3e5, 7.25, 0.1}, 1e9},   // coefficient above 1: unchanged
      {{1e6, 3e5, 7.25, 0.1}, 0.0},   // no clipping, norm only
      {{0, 0, 0}, 1.0},               // zero gradient
      {{4.0, inf, 1.0}, 1.0},         // overflow: coefficient 0
      {{4.0, nan}, 1.0},              // NaN norm: a NaN scale, as torch's clamp gives
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    HostStream stream(0);
    std::latch release(1);
    ASSERT_TRUE(stream.Enqueue([&] { release.wait(); }).ok());
    const std::vector<double>& want = cases[c].partials;
    std::vector<double> partials(want.size(), -1.0);
    StepScalars out{.norm = -1, .grad_scale = -1};
    ASSERT_TRUE(stream.Copy(partials.data(), want.data(), want.size() * sizeof(double)).ok());
    ASSERT_TRUE(Host()
                    .ComputeStepScalars(&out, partials.data(), partials.size(), mean,
                                        cases[c].max_norm, &stream)
                    .ok());
    release.count_down();
    ASSERT_TRUE(stream.Synchronize().ok());
    const StepScalars expected = ExpectedStepScalars(want, mean, cases[c].max_norm);
    EXPECT_EQ(std::memcmp(&out.norm, &expected.norm, sizeof(double)), 0)
        << "case " << c << ": " << out.norm << " vs " << expected.norm;
    EXPECT_EQ(std::memcmp(&out.grad_scale, &expected.grad_scale, sizeof(float)), 0)
        << "case " << c << ": " << out.grad_scale << " vs " << expected.grad_scale;
  }
}

TEST(ElementwiseExecutorTest, MetaDevicesDoNothing) {
  MetaStream stream(0);
  const ElementwiseExecutor& meta = ElementwiseExecutor::For(DeviceKind::kMeta);
  std::vector<float> data(64, 2.0f);
  const std::vector<float> src(64, std::numeric_limits<float>::infinity());
  const float factor = 4.0f;
  double sum = 0;
  int32_t flag = 0;
  EXPECT_TRUE(meta.Widen(data.data(), src.data(), 64, DType::kF32, &stream).ok());
  EXPECT_TRUE(meta.Narrow(data.data(), src.data(), 64, DType::kF32, &stream).ok());
  EXPECT_TRUE(meta.AccumulateNarrow(data.data(), src.data(), 64, DType::kF32, &stream).ok());
  EXPECT_TRUE(meta.Fill(data.data(), 9.0f, 64, DType::kF32, &stream).ok());
  EXPECT_TRUE(meta.Scale(data.data(), &factor, 64, DType::kF32, &stream).ok());
  EXPECT_TRUE(meta.SumOfSquares(&sum, src.data(), 64, DType::kF32, &stream).ok());
  EXPECT_TRUE(meta.FlagNonFinite(&flag, src.data(), 64, DType::kF32, &stream).ok());
  EXPECT_EQ(data, std::vector<float>(64, 2.0f));
  EXPECT_EQ(sum, 0.0);
  EXPECT_EQ(flag, 0);
  // Arguments are checked all the same.
  EXPECT_EQ(meta.Scale(data.data(), nullptr, 64, DType::kF32, &stream).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseExecutorTest, ChosenByTheDeviceSystemsKind) {
  auto system = DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 64 * kMiB});
  ASSERT_TRUE(system.ok()) << system.status();
  ASSERT_EQ((*system)->kind(), DeviceKind::kHost);
  const ElementwiseExecutor& ex = ElementwiseExecutor::For((*system)->kind());
  Stream* stream = (*system)->default_stream(0);
  absl::StatusOr<void*> mem = (*system)->pool(0).Allocate(1000 * 2, Tag::kGradients, stream);
  ASSERT_TRUE(mem.ok()) << mem.status();
  ASSERT_TRUE(ex.Fill(*mem, 1.5f, 1000, DType::kBF16, stream).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(DecodeAt(*mem, DType::kBF16, i), 1.5f);
  ASSERT_TRUE((*system)->Deallocate(*mem, 1000 * 2, stream).ok());
}

TEST(ElementwiseExecutorTest, BadArgumentsAreErrorsThatSayWhat) {
  HostStream stream(0);
  std::vector<float> f(8, 1.0f);
  std::vector<uint16_t> h(8, 0);
  double sum = 0;
  int32_t flag = 0;
  const auto message = [](const absl::Status& s) { return std::string(s.message()); };

  absl::Status s = Host().Widen(f.data(), nullptr, 8, DType::kBF16, &stream);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(message(s).find("Widen of 8 bf16 elements: src"), std::string::npos) << s;
  s = Host().Narrow(h.data(), f.data(), 8, static_cast<DType>(9), &stream);
  EXPECT_NE(message(s).find("invalid dtype 9"), std::string::npos) << s;
  s = Host().Narrow(reinterpret_cast<uint8_t*>(h.data()) + 1, f.data(), 4, DType::kF16, &stream);
  EXPECT_NE(message(s).find("dst"), std::string::npos) << s;
  EXPECT_NE(message(s).find("2-byte aligned"), std::string::npos) << s;
  s = Host().SumOfSquares(reinterpret_cast<double*>(reinterpret_cast<uint8_t*>(&sum) + 4),
                          f.data(), 8, DType::kF32, &stream);
  EXPECT_NE(message(s).find("sum"), std::string::npos) << s;
  s = Host().FlagNonFinite(nullptr, f.data(), 8, DType::kF32, &stream);
  EXPECT_NE(message(s).find("flag"), std::string::npos) << s;
  s = Host().Scale(f.data(), nullptr, 8, DType::kF32, &stream);
  EXPECT_NE(message(s).find("factor"), std::string::npos) << s;
  StepScalars scalars[2];
  s = Host().ComputeStepScalars(
      reinterpret_cast<StepScalars*>(reinterpret_cast<uint8_t*>(scalars) + 4), &sum, 1, 1.0f, 1.0,
      &stream);
  EXPECT_NE(message(s).find("StepScalars of 1 f32 elements: scalars"), std::string::npos) << s;
  s = Host().ComputeStepScalars(scalars, nullptr, 1, 1.0f, 1.0, &stream);
  EXPECT_NE(message(s).find("partials"), std::string::npos) << s;
  s = Host().Fill(f.data(), 0.0f, 8, DType::kF32, nullptr);
  EXPECT_NE(message(s).find("stream is null"), std::string::npos) << s;
  // Nothing to do, nothing to check but kind and dtype.
  EXPECT_TRUE(Host().Widen(nullptr, nullptr, 0, DType::kF16, &stream).ok());
  EXPECT_EQ(flag, 0);
}

}  // namespace
}  // namespace zero::testing
