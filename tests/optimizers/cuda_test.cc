// The CUDA kernels against the CPU, bit for bit. Compiled everywhere; the
// comparisons run only where a card is present.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "compute/cuda/launch.h"
#include "gtest/gtest.h"
#include "optimizers/cuda/launch.h"
#include "tests/optimizers/test_util.h"

namespace zero::testing {
namespace {

bool HaveCard() { return cuda::DeviceCount() > 0; }

TEST(CudaTest, WithoutACardCallsFailCleanly) {
  if (HaveCard()) GTEST_SKIP() << "a card is present";
  auto opt = MakeOptimizerFor(Kind::kAdamW);
  Problem p(64, DType::kF32, 2, std::nullopt);
  EXPECT_EQ(opt->StepCuda(p.Args(1), nullptr).code(), absl::StatusCode::kFailedPrecondition);
  int32_t flag = 0;
  EXPECT_EQ(cuda::FlagInfOrNan(p.params.data(), DType::kF32, 64, &flag, nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
}

// A device mirror of a Problem.
class DeviceProblem {
 public:
  explicit DeviceProblem(const Problem& host) : n_(host.size()) {
    params_ = Upload(host.params.data(), n_ * 4);
    for (const std::vector<float>& s : host.state) state_.push_back(Upload(s.data(), n_ * 4));
    if (host.copy_dtype) copy_ = Upload(host.copy.data(), host.copy.size());
  }
  ~DeviceProblem() {
    cudaFree(params_);
    cudaFree(grads_);
    for (void* s : state_) cudaFree(s);
    cudaFree(copy_);
  }

  StepArgs Args(const Problem& host, int64_t step) {
    cudaFree(grads_);
    grads_ = Upload(host.grads.data(), host.grads.size());
    spans_.clear();
    for (void* s : state_) spans_.emplace_back(static_cast<float*>(s), n_);
    StepArgs args;
    args.params = {static_cast<float*>(params_), n_};
    args.grads = grads_;
    args.grad_dtype = host.grad_dtype;
    args.state = spans_;
    args.step = step;
    args.param_copy = copy_;
    if (host.copy_dtype) args.copy_dtype = *host.copy_dtype;
    return args;
  }

  void Download(Problem& host) const {
    EXPECT_EQ(cudaMemcpy(host.params.data(), params_, n_ * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < state_.size(); ++i) {
      EXPECT_EQ(cudaMemcpy(host.state[i].data(), state_[i], n_ * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    if (copy_) {
      EXPECT_EQ(cudaMemcpy(host.copy.data(), copy_, host.copy.size(), cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
  }

 private:
  static void* Upload(const void* data, size_t bytes) {
    void* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, bytes), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(d, data, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
  }

  size_t n_;
  void* params_ = nullptr;
  void* grads_ = nullptr;
  std::vector<void*> state_;
  void* copy_ = nullptr;
  std::vector<std::span<float>> spans_;
};

TEST(CudaTest, EveryOptimizerAndDtypeMatchesCpuBitForBit) {
  if (!HaveCard()) GTEST_SKIP() << "no CUDA device";
  for (Kind kind : kAllKinds) {
    for (DType grad : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (std::optional<DType> copy : {std::optional<DType>(), std::optional(DType::kBF16),
                                        std::optional(DType::kF16), std::optional(DType::kF32)}) {
        auto opt = MakeOptimizerFor(kind);
        Problem cpu(100003, grad, opt->state_buffers(), copy);
        Problem gpu = cpu;
        DeviceProblem device(gpu);
        for (int step = 1; step <= 3; ++step) {
          cpu.SetGrads(step);
          gpu.SetGrads(step);
          ASSERT_TRUE(opt->Step(cpu.Args(step)).ok());
          ASSERT_TRUE(opt->StepCuda(device.Args(gpu, step), nullptr).ok());
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        }
        device.Download(gpu);
        EXPECT_TRUE(SameResults(gpu, cpu)) << KindName(kind) << " " << Name(grad);
      }
    }
  }
}

TEST(CudaTest, FlagInfOrNan) {
  if (!HaveCard()) GTEST_SKIP() << "no CUDA device";
  std::vector<float> x(100000, 1.0f);
  void* dx = nullptr;
  void* flag_memory = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&flag_memory, 4), cudaSuccess);
  auto* flag = static_cast<int32_t*>(flag_memory);
  for (float poison : {1.0f, INFINITY, NAN}) {
    x[77777] = poison;
    ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(flag, 0, 4), cudaSuccess);
    ASSERT_TRUE(cuda::FlagInfOrNan(dx, DType::kF32, x.size(), flag, nullptr).ok());
    int32_t host_flag = -1;
    ASSERT_EQ(cudaMemcpy(&host_flag, flag, 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(host_flag, std::isfinite(poison) ? 0 : 1);
  }
  cudaFree(dx);
  cudaFree(flag);
}

}  // namespace
}  // namespace zero::testing
