// Quantization on a card against the host (compute/quantize.h): the same
// bytes and the same ordered sums, both rounding modes, int8 and int4, every
// dtype, error feedback included. Compiled everywhere; the comparisons run
// only where a card is present (never on CI).
#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <vector>

#include "compute/cuda/launch.h"
#include "compute/quantize.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"

namespace zero {
namespace {

TEST(QuantizeCudaTest, WithoutACardCallsFailCleanly) {
  if (cuda::DeviceCount() > 0) GTEST_SKIP() << "a card is present";
  std::vector<float> x(16, 1.0f);
  std::vector<uint8_t> q(QuantizedBytes(16, {}));
  const absl::Status s = cuda::RunQuantize({DType::kF32, 16, x.data(), q.data(), {}}, -1, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

// Device memory holding `bytes`, copied back by Read.
struct CardBuffer {
  explicit CardBuffer(size_t n) : bytes(n) { EXPECT_EQ(cudaMalloc(&ptr, n), cudaSuccess); }
  ~CardBuffer() { cudaFree(ptr); }
  void Write(const void* from) { ASSERT_EQ(cudaMemcpy(ptr, from, bytes, cudaMemcpyHostToDevice), cudaSuccess); }
  std::vector<uint8_t> Read() const {
    std::vector<uint8_t> out(bytes);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  void* ptr = nullptr;
  size_t bytes;
};

class QuantizeCardTest : public ::testing::TestWithParam<std::tuple<int, bool, DType>> {
 protected:
  void SetUp() override {
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no card";
  }
};

TEST_P(QuantizeCardTest, SameBytesAndSumsAsTheHost) {
  const auto [bits, stochastic, dtype] = GetParam();
  const QuantFormat f{.bits = bits, .block = 256, .stochastic = stochastic, .seed = 7};
  const size_t count = 10'001, parts = 3, q = QuantizedBytes(count, f);
  std::mt19937 gen(3);
  std::normal_distribution<float> d(0, 2);
  std::vector<uint8_t> src(count * SizeOf(dtype));
  std::vector<float> residual(count);
  for (size_t i = 0; i < count; ++i) {
    const float x = d(gen);
    if (dtype == DType::kF32) std::memcpy(&src[4 * i], &x, 4);
    if (dtype == DType::kBF16) reinterpret_cast<bf16*>(src.data())[i] = FloatToBF16(x);
    if (dtype == DType::kF16) reinterpret_cast<f16*>(src.data())[i] = FloatToF16(x);
    residual[i] = d(gen) * 1e-3f;
  }
  std::vector<uint8_t> host(parts * q);
  std::vector<float> host_residual = residual;
  for (size_t p = 0; p < parts; ++p) {
    QuantizeOnHost({dtype, count, src.data(), host.data() + p * q, f, p * count,
                    p == 0 ? host_residual.data() : nullptr});
  }
  CardBuffer card_src(src.size()), card_q(parts * q), card_res(count * 4), card_out(count * 4);
  card_src.Write(src.data());
  card_res.Write(residual.data());
  for (size_t p = 0; p < parts; ++p) {
    ASSERT_TRUE(cuda::RunQuantize({dtype, count, card_src.ptr, static_cast<char*>(card_q.ptr) + p * q,
                                   f, p * count, p == 0 ? static_cast<float*>(card_res.ptr) : nullptr},
                                  -1, nullptr)
                    .ok());
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(card_q.Read(), host);
  const std::vector<uint8_t> res = card_res.Read();
  EXPECT_EQ(std::memcmp(res.data(), host_residual.data(), res.size()), 0);
  std::vector<float> host_sum(count);
  DequantizeSumOnHost({DType::kF32, count, int(parts), host.data(), host_sum.data(), f});
  ASSERT_TRUE(cuda::RunDequantizeSum({DType::kF32, count, int(parts), card_q.ptr, card_out.ptr, f},
                                     -1, nullptr)
                  .ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint8_t> sum = card_out.Read();
  EXPECT_EQ(std::memcmp(sum.data(), host_sum.data(), sum.size()), 0);
}

INSTANTIATE_TEST_SUITE_P(BitsRoundingDType, QuantizeCardTest,
                         ::testing::Combine(::testing::Values(8, 4), ::testing::Bool(),
                                            ::testing::Values(DType::kF32, DType::kBF16,
                                                              DType::kF16)));

}  // namespace
}  // namespace zero
