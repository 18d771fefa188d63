#include "bazel/example/axpy.h"

#include <gtest/gtest.h>

#include <vector>

namespace example {
namespace {

TEST(CudaRule, AxpyRunsOrSkipsWithoutDriver) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    EXPECT_TRUE(err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice)
        << cudaGetErrorName(err);
    GTEST_SKIP() << "no CUDA device: " << cudaGetErrorName(err);
  }
  const int n = 1000;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  ASSERT_EQ(AxpyOnDevice({2.0f, n}, x.data(), y.data()), cudaSuccess);
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], 1.0f + 2.0f * i) << i;
}

}  // namespace
}  // namespace example
