// Block-wise quantization (compute/quantize_rule.h) on the host: error per
// block within its bound, ties to even, int4 packing, seeded stochastic
// rounding, non-finite blocks, error feedback, ordered sums, and the errors.
#include "compute/quantize.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> QuantizeHost(const std::vector<float>& x, const QuantFormat& f,
                                  float* residual = nullptr, uint64_t index_base = 0) {
  std::vector<uint8_t> out(QuantizedBytes(x.size(), f), 0xAB);
  const QuantizeOp op{DType::kF32, x.size(), x.data(), out.data(), f, index_base, residual};
  EXPECT_TRUE(ValidateQuantize(op).ok());
  QuantizeOnHost(op);
  return out;
}

std::vector<float> Dequantize(const std::vector<uint8_t>& q, size_t count, const QuantFormat& f,
                              int parts = 1) {
  std::vector<float> out(count);
  DequantizeSumOnHost({DType::kF32, count, parts, q.data(), out.data(), f});
  return out;
}

std::vector<float> Gaussian(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0, 1);
  std::vector<float> x(n);
  for (float& v : x) {
    const float magnitude = 1 + static_cast<float>(gen() % 5);
    v = d(gen) * magnitude;
  }
  return x;
}

class QuantBits : public ::testing::TestWithParam<int> {};

TEST_P(QuantBits, ErrorPerElementIsAtMostHalfTheBlockScale) {
  const QuantFormat f{.bits = GetParam(), .block = 64};
  const std::vector<float> x = Gaussian(1000, 7);  // 15 full blocks and one of 40
  const std::vector<uint8_t> q = QuantizeHost(x, f);
  ASSERT_EQ(q.size() % 4, 0u);
  const std::vector<float> y = Dequantize(q, x.size(), f);
  for (size_t b = 0; b * f.block < x.size(); ++b) {
    float absmax = 0;
    const size_t end = std::min(x.size(), (b + 1) * f.block);
    for (size_t i = b * f.block; i < end; ++i) absmax = std::max(absmax, std::fabs(x[i]));
    const float scale = absmax / f.qmax();
    float worst = 0;
    for (size_t i = b * f.block; i < end; ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
    EXPECT_LE(worst, 0.5f * scale * (1 + 1e-6f)) << "block " << b;
    EXPECT_GT(worst, 0.05f * scale) << "block " << b << ": the check could not fail";
  }
}

TEST_P(QuantBits, StochasticRoundingRepeatsWithItsSeedAndIsUnbiased) {
  QuantFormat f{.bits = GetParam(), .block = 4096, .stochastic = true, .seed = 99};
  std::vector<float> x(4096, 0.3f);
  x[0] = static_cast<float>(f.qmax());  // scale 1: every other value is 0.3
  const std::vector<uint8_t> a = QuantizeHost(x, f), b = QuantizeHost(x, f);
  EXPECT_EQ(a, b);
  f.seed = 100;
  EXPECT_NE(QuantizeHost(x, f), a);
  const std::vector<float> y = Dequantize(a, x.size(), f);
  double mean = 0;
  for (size_t i = 1; i < y.size(); ++i) mean += y[i];
  mean /= static_cast<double>(y.size() - 1);
  EXPECT_NEAR(mean, 0.3, 0.03);
  // Round to nearest would give 0 everywhere.
  f.stochastic = false;
  EXPECT_EQ(Dequantize(QuantizeHost(x, f), x.size(), f)[1], 0.0f);
}

TEST_P(QuantBits, NonFiniteBlocksReadBackAsNanAndZeroBlocksAsZero) {
  const QuantFormat f{.bits = GetParam(), .block = 8};
  std::vector<float> x(24, 1.0f);
  x[3] = INFINITY;
  x[12] = NAN;
  for (size_t i = 16; i < 24; ++i) x[i] = 0;
  const std::vector<float> y = Dequantize(QuantizeHost(x, f), x.size(), f);
  for (size_t i = 0; i < 16; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
  for (size_t i = 16; i < 24; ++i) EXPECT_EQ(y[i], 0.0f) << i;
}

INSTANTIATE_TEST_SUITE_P(Quantize, QuantBits, ::testing::Values(8, 4));

// Scale 1 (absmax = qmax): halves round to the even integer.
TEST(Quantize, TiesGoToEven) {
  const QuantFormat f{.bits = 8, .block = 8};
  const std::vector<float> x = {127, 2.5f, 3.5f, -2.5f, -3.5f, 0.5f, 1.5f, -0.5f};
  const std::vector<float> y = Dequantize(QuantizeHost(x, f), x.size(), f);
  EXPECT_EQ(y, (std::vector<float>{127, 2, 4, -2, -4, 0, 2, -0.0f}));
}

// int4: the even element in the low nibble, two's complement; an odd count
// leaves the last high nibble and the word padding zero.
TEST(Quantize, Int4PacksTwoPerByte) {
  const QuantFormat f{.bits = 4, .block = 6};
  const std::vector<float> x = {7, -1, 3, -7, 0, 5, 1};  // blocks: 6 elements (scale 1), 1
  const std::vector<uint8_t> q = QuantizeHost(x, f);
  ASSERT_EQ(q.size(), 12u);  // 2 scales, 4 payload bytes, padding to 12
  float scales[2];
  std::memcpy(scales, q.data(), 8);
  EXPECT_EQ(scales[0], 1.0f);
  EXPECT_EQ(scales[1], 1.0f / 7);
  EXPECT_EQ(q[8], 0xF7);   // 7, -1
  EXPECT_EQ(q[9], 0x93);   // 3, -7
  EXPECT_EQ(q[10], 0x50);  // 0, 5
  EXPECT_EQ(q[11], 0x07);  // 1 -> 7 with scale 1/7, high nibble 0
}

// Error feedback: the residual is what the chunk lost, exactly, and the next
// quantization adds it back.
TEST(Quantize, ErrorFeedbackCarriesTheResidualExactly) {
  const QuantFormat f{.bits = 4, .block = 16};
  const std::vector<float> x = Gaussian(64, 3);
  std::vector<float> residual(64, 0.0f);
  const std::vector<float> y1 = Dequantize(QuantizeHost(x, f, residual.data()), 64, f);
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(residual[i], x[i] - y1[i]) << i;
  const std::vector<float> before = residual;
  const std::vector<float> y2 = Dequantize(QuantizeHost(x, f, residual.data()), 64, f);
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(residual[i], (x[i] + before[i]) - y2[i]) << i;
  // Over two steps the loss stays within one step's bound instead of doubling.
  const std::vector<float> plain = Dequantize(QuantizeHost(x, f), 64, f);
  double with = 0, without = 0;
  for (size_t i = 0; i < 64; ++i) {
    with += std::fabs(2 * x[i] - (y1[i] + y2[i]));
    without += std::fabs(2 * x[i] - 2 * plain[i]);
  }
  EXPECT_LT(with, without);
}

// Parts are added in order, in fp32, rounded once to the output dtype.
TEST(Quantize, PartsAreSummedInOrder) {
  const QuantFormat f{.bits = 8, .block = 32};
  const size_t n = 100;
  std::vector<std::vector<float>> inputs = {Gaussian(n, 1), Gaussian(n, 2), Gaussian(n, 3)};
  std::vector<uint8_t> all;
  std::vector<std::vector<float>> back;
  for (const auto& x : inputs) {
    const std::vector<uint8_t> q = QuantizeHost(x, f);
    all.insert(all.end(), q.begin(), q.end());
    back.push_back(Dequantize(q, n, f));
  }
  const std::vector<float> sum = Dequantize(all, n, f, 3);
  std::vector<bf16> narrow(n);
  DequantizeSumOnHost({DType::kBF16, n, 3, all.data(), narrow.data(), f});
  for (size_t i = 0; i < n; ++i) {
    const float want = (back[0][i] + back[1][i]) + back[2][i];
    ASSERT_EQ(sum[i], want) << i;
    ASSERT_EQ(narrow[i].bits, FloatToBF16(want).bits) << i;
  }
}

TEST(Quantize, BadFormatsAndOpsAreRefused) {
  float x = 1;
  uint8_t q[8];
  auto invalid = [](const absl::Status& s, const char* words) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(words));
  };
  invalid(ValidateQuantFormat({.bits = 3}), "unknown bit width 3");
  invalid(ValidateQuantFormat({.bits = 8, .block = 0}), "positive even");
  invalid(ValidateQuantFormat({.bits = 4, .block = 7}), "positive even");
  invalid(ValidateQuantize({DType::kF32, 1, nullptr, q, {}}), "null buffer");
  invalid(ValidateQuantize({static_cast<DType>(5), 1, &x, q, {}}), "unknown dtype 5");
  invalid(ValidateDequantize({DType::kF32, 1, 0, q, &x, {}}), "0 parts");
  // Parts closer together than a chunk's bytes would overlap.
  invalid(ValidateDequantize({DType::kF32, 1, 2, q, &x, {}, QuantizedBytes(1, {}) - 4}),
          "overlap");
}

// Through a stream: host devices run it in order; meta devices do nothing.
TEST(Quantize, RunsOnAStreamsDevice) {
  auto system = *DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 64 << 20});
  const QuantFormat f{.bits = 8, .block = 16};
  const std::vector<float> x = Gaussian(40, 9);
  std::vector<uint8_t> q(QuantizedBytes(40, f));
  std::vector<float> y(40);
  Stream& stream = *system->default_stream(0);
  ASSERT_TRUE(Quantize(system->kind(), stream, {DType::kF32, 40, x.data(), q.data(), f}).ok());
  ASSERT_TRUE(
      DequantizeSum(system->kind(), stream, {DType::kF32, 40, 1, q.data(), y.data(), f}).ok());
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_EQ(q, QuantizeHost(x, f));
  EXPECT_EQ(y, Dequantize(q, 40, f));
  const absl::Status bad =
      Quantize(system->kind(), stream, {DType::kF32, 40, x.data(), q.data(), {.bits = 2}});
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
}

}  // namespace
}  // namespace zero
