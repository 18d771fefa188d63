#include "memory/device_system.h"

#include <cstdlib>

#include "base/units.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

TEST(DeviceSpecTest, Parses) {
  auto spec = ParseDeviceSpec("host:8x16GiB");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->kind, DeviceSpec::Kind::kHost);
  EXPECT_EQ(spec->count, 8);
  EXPECT_EQ(spec->capacity, 16 * kGiB);
  spec = ParseDeviceSpec("meta:1024x80GB");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->kind, DeviceSpec::Kind::kMeta);
  EXPECT_EQ(spec->count, 1024);
  EXPECT_EQ(ParseDeviceSpec("cuda")->kind, DeviceSpec::Kind::kCuda);
  EXPECT_EQ(ParseDeviceSpec("auto")->kind, DeviceSpec::Kind::kAuto);
}

TEST(DeviceSpecTest, ParsesCardsAndOptions) {
  auto spec = ParseDeviceSpec("cuda:0,2,chunk=256MiB,reserve=5%");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->kind, DeviceSpec::Kind::kCuda);
  EXPECT_EQ(spec->cuda_devices, (std::vector<int>{0, 2}));
  EXPECT_EQ(spec->space.chunk, 256 * kMiB);
  EXPECT_DOUBLE_EQ(spec->space.reserve->fraction, 0.05);
  EXPECT_EQ(ParseDeviceSpec("cuda:3")->cuda_devices, (std::vector<int>{3}));
  EXPECT_TRUE(ParseDeviceSpec("cuda")->cuda_devices.empty());
  EXPECT_EQ(ParseDeviceSpec("auto,reserve=4GiB")->space.reserve->bytes, 4 * kGiB);
  spec = ParseDeviceSpec("host:2x64MiB,chunk=8MiB");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->count, 2);
  EXPECT_EQ(spec->space.chunk, 8 * kMiB);
}

TEST(DeviceSpecTest, OptionsReachTheSpace) {
  auto system = DeviceSystem::Create(*ParseDeviceSpec("host:1x64MiB,chunk=8MiB,reserve=25%"));
  ASSERT_TRUE(system.ok()) << system.status();
  EXPECT_EQ((*system)->space().granularity(), 8 * kMiB);
  EXPECT_EQ((*system)->pool(0).stats().capacity, 48 * kMiB);
}

TEST(DeviceSpecTest, RejectsNonsense) {
  for (const char* bad : {"tpu", "host:0x1GiB", "host:8", "host:8x", "host:8xlots",
                          "meta:4x1KiB", "cuda:2x4GiB", "host:-1x4GiB", "cuda:0,0", "cuda:-1",
                          "cuda:x", "auto:3", "host,8x1GiB", "host:2x1GiB,3x1GiB",
                          "host:2x1GiB,bogus=1", "cuda,chunk=3MiB", "cuda,chunk=1MiB",
                          "cuda:0,chunk=64MiB,1", "auto,reserve=100%", "auto,reserve=lots", ""}) {
    EXPECT_EQ(ParseDeviceSpec(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(DeviceSpecTest, EnvironmentVariableSelectsDevices) {
  setenv("ZERO_DEVICES", "meta:3x1GiB", 1);
  auto system = DeviceSystem::CreateFromEnvironment();
  unsetenv("ZERO_DEVICES");
  ASSERT_TRUE(system.ok()) << system.status();
  EXPECT_EQ((*system)->kind(), DeviceKind::kMeta);
  EXPECT_EQ((*system)->device_count(), 3);
}

// Specs that parse but cannot be laid out: slices whose total wraps 64 bits
// (they overlapped: two devices gave out the same addresses), and pool
// rounding that is not a power of two up to the space's granularity (0 made
// every block 0 bytes: two allocations shared an address).
TEST(DeviceSystemTest, RefusesWhatCannotBeLaidOut) {
  for (const char* spec : {"host:4x4194304TiB", "meta:1024x16384TiB"}) {
    absl::StatusOr<std::unique_ptr<DeviceSystem>> system =
        DeviceSystem::Create(*ParseDeviceSpec(spec));
    EXPECT_EQ(system.status().code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_THAT(std::string(system.status().message()), HasSubstr("64 bits")) << spec;
  }
  for (size_t round_to : {size_t{0}, size_t{768}, size_t{64} << 20}) {
    absl::StatusOr<std::unique_ptr<DeviceSystem>> system =
        DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 64 * kMiB}, {.round_to = round_to});
    EXPECT_EQ(system.status().code(), absl::StatusCode::kInvalidArgument) << round_to;
    EXPECT_THAT(std::string(system.status().message()), HasSubstr("round_to")) << round_to;
  }
  EXPECT_TRUE(DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 64 * kMiB}, {.round_to = 4096})
                  .ok());
}

TEST(DeviceSystemTest, AutoFallsBackToHostWithoutACard) {
  auto system = DeviceSystem::Create({DeviceSpec::Kind::kAuto, 2, 64 * kMiB});
  ASSERT_TRUE(system.ok()) << system.status();
  if ((*system)->kind() == DeviceKind::kCuda) GTEST_SKIP() << "a card is present";
  EXPECT_EQ((*system)->kind(), DeviceKind::kHost);
  EXPECT_EQ((*system)->device_count(), 2);
}

TEST(DeviceSystemTest, DeviceOfIsSliceArithmetic) {
  auto system = *DeviceSystem::Create({DeviceSpec::Kind::kMeta, 4, 64 * kMiB});
  UvaSpace& space = system->space();
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(space.device_of(reinterpret_cast<void*>(space.slice_begin(d))), d);
    EXPECT_EQ(space.device_of(reinterpret_cast<void*>(space.slice_begin(d) + space.slice_size() - 1)), d);
  }
  EXPECT_EQ(space.device_of(reinterpret_cast<void*>(space.slice_begin(4))), std::nullopt);
  int on_stack = 0;
  EXPECT_EQ(space.device_of(&on_stack), std::nullopt);
  EXPECT_EQ(system->Deallocate(&on_stack, 4).code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(system->CreateStream(9).ok());
}

TEST(UvaSpaceTest, EnforcesCapacityAndAlignment) {
  auto system = *DeviceSystem::Create({DeviceSpec::Kind::kHost, 2, 8 * kMiB});
  UvaSpace& space = system->space();
  const uintptr_t base = space.slice_begin(1);
  EXPECT_TRUE(space.Map(1, base, 8 * kMiB).ok());
  EXPECT_EQ(space.Map(1, base + 8 * kMiB, 2 * kMiB).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(space.Map(1, base + 4096, 2 * kMiB).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(space.Map(0, base, 2 * kMiB).code(), absl::StatusCode::kInvalidArgument)
      << "not device 0's slice";
  static_cast<char*>(reinterpret_cast<void*>(base))[100] = 1;  // mapped means writable
  EXPECT_TRUE(space.Unmap(1, base, 8 * kMiB).ok());
  EXPECT_EQ(space.mapped_bytes(1), 0u);
}

TEST(DeviceSystemTest, OnlyCardsWrapNativeStreams) {
  auto system = *DeviceSystem::Create({DeviceSpec::Kind::kHost, 2, 8 * kMiB});
  int handle = 0;
  EXPECT_EQ(system->WrapNativeStream(0, &handle).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(system->WrapNativeStream(0, &handle).status().code(),
            absl::StatusCode::kUnimplemented) << "a failure is not cached";
  EXPECT_EQ(system->WrapNativeStream(2, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CudaBackendTest, WithoutADriverSaysUnavailable) {
  auto system = DeviceSystem::Create({DeviceSpec::Kind::kCuda});
  if (system.ok()) GTEST_SKIP() << "a card is present; the card check covers it";
  EXPECT_EQ(system.status().code(), absl::StatusCode::kUnavailable) << system.status();
}

}  // namespace
}  // namespace zero
