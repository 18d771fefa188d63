// CRC-32C: known values, the instruction against the tables, the three
// lanes' joins and the combine operator.
#include "base/crc32c.h"

#include <random>
#include <string>

#include "gtest/gtest.h"

namespace zero {
namespace {

TEST(Crc32c, KnownValues) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);            // the standard check value
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);  // RFC 3720 B.4
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  EXPECT_EQ(Crc32c("", 0), 0u);
}

TEST(Crc32c, InstructionMatchesTablesAndExtends) {
  std::mt19937 rng(7);
  std::string data(4099, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t n : {0u, 1u, 7u, 8u, 9u, 63u, 64u, 1000u, 4099u}) {
    EXPECT_EQ(Crc32c(data.data(), n), Crc32cExtendPortable(0, data.data(), n)) << n;
    const size_t half = n / 3;
    EXPECT_EQ(Crc32c(data.data(), n),
              Crc32cExtend(Crc32c(data.data(), half), data.data() + half, n - half))
        << n;
  }
}

// Sizes around the three-lane path (3 x 4096 bytes per round), at odd
// starts, with a non-zero CRC to extend: the lanes, their joins and the tail.
TEST(Crc32c, ThreeLanesMatchTheTables) {
  std::mt19937 rng(11);
  std::string data(5 * 12288 + 100, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t start : {0u, 1u, 5u}) {
    for (size_t n : {12287u, 12288u, 12289u, 24576u, 24583u, 3u * 12288 + 77}) {
      const char* p = data.data() + start;
      EXPECT_EQ(Crc32cExtend(0x1234567u, p, n), Crc32cExtendPortable(0x1234567u, p, n))
          << start << " " << n;
    }
  }
}

TEST(Crc32c, CombineEqualsTheWholeCrc) {
  std::mt19937 rng(3);
  std::string data(40000, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t split : {0u, 1u, 8u, 4096u, 12288u, 39999u, 40000u}) {
    EXPECT_EQ(Crc32cCombine(Crc32c(data.data(), split), Crc32c(data.data() + split, 40000 - split),
                            40000 - split),
              Crc32c(data.data(), data.size()))
        << split;
  }
}

}  // namespace
}  // namespace zero
