// What a card's start-up failure becomes: only "no driver" and "no card" let
// `auto` fall back quietly; a driver too old for the runtime or any other
// error says so. Runs without a card: the classification is pure.
#include <cuda_runtime_api.h>

#include <string>

#include "gtest/gtest.h"
#include "memory/cuda/driver_api.h"
#include "memory/device_system.h"

namespace zero {
namespace {

using cuda::ClassifyCudaStart;

TEST(CudaStartTest, NoDriverAndNoCardAreUnavailable) {
  EXPECT_TRUE(ClassifyCudaStart(cudaSuccess, 2, 13000, 13000).ok());
  EXPECT_TRUE(absl::IsUnavailable(ClassifyCudaStart(cudaSuccess, 0, 13000, 13000)));
  EXPECT_TRUE(absl::IsUnavailable(ClassifyCudaStart(cudaErrorNoDevice, 0, 13000, 13000)));
  EXPECT_TRUE(absl::IsUnavailable(ClassifyCudaStart(cudaErrorInsufficientDriver, 0, 0, 13000)));
}

TEST(CudaStartTest, AnOldDriverSaysWhichVersions) {
  const absl::Status old = ClassifyCudaStart(cudaErrorInsufficientDriver, 0, 12040, 13000);
  EXPECT_EQ(old.code(), absl::StatusCode::kFailedPrecondition) << old;
  EXPECT_NE(old.message().find("CUDA 12.4, older than the CUDA 13.0 runtime"), std::string::npos)
      << old;
}

TEST(CudaStartTest, OtherErrorsAreNotTakenForNoCard) {
  const absl::Status other = ClassifyCudaStart(cudaErrorInitializationError, 0, 13000, 13000);
  EXPECT_EQ(other.code(), absl::StatusCode::kInternal) << other;
  EXPECT_NE(other.message().find("cudaGetDeviceCount"), std::string::npos) << other;
}

TEST(CudaStartTest, OnlyAutoFallsBackAndOnlyNoCardQuietly) {
  std::string reason;
  EXPECT_TRUE(FallsBackToHost(DeviceSpec::Kind::kAuto, absl::UnavailableError("no card"), &reason));
  EXPECT_EQ(reason, "");
  EXPECT_TRUE(FallsBackToHost(DeviceSpec::Kind::kAuto,
                              absl::FailedPreconditionError("driver too old"), &reason));
  EXPECT_NE(reason.find("driver too old"), std::string::npos) << reason;
  EXPECT_FALSE(FallsBackToHost(DeviceSpec::Kind::kCuda, absl::UnavailableError("no card"), &reason));
  EXPECT_FALSE(FallsBackToHost(DeviceSpec::Kind::kCuda, absl::InternalError("x"), &reason));
}

TEST(CudaStartTest, AskingForCardsWithoutOneIsAnError) {
  auto system = DeviceSystem::Create({.kind = DeviceSpec::Kind::kCuda});
  if (system.ok()) GTEST_SKIP() << "a card is present";
  EXPECT_TRUE(absl::IsUnavailable(system.status())) << system.status();
}

}  // namespace
}  // namespace zero
