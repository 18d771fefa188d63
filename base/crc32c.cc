#include "base/crc32c.h"

#include <array>
#include <cstring>

namespace zero {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // Castagnoli, bit-reflected

// kTables[k][b]: the CRC of byte b followed by k zero bytes.
constexpr std::array<std::array<uint32_t, 256>, 8> MakeTables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1u) ? kPoly : 0u);
    t[0][b] = c;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  }
  return t;
}
constexpr auto kTables = MakeTables();

// a * b modulo the polynomial, in the reflected representation (bit 31 is
// x^0): how a CRC register moves past zeros without reading them.
uint32_t MultiplyModP(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if (a & m) product ^= b;
    b = (b & 1u) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return product;
}

// x^(8 * bytes) modulo the polynomial: the operator that appends `bytes`
// zero bytes to a register, by squaring (x^(2^k) for each set bit).
uint32_t ZerosOperator(size_t bytes) {
  uint32_t power = 1u << 30;  // x^1
  uint32_t result = 1u << 31;  // x^0
  for (size_t n = bytes * 8; n != 0; n >>= 1) {
    if (n & 1) result = MultiplyModP(power, result);
    power = MultiplyModP(power, power);
  }
  return result;
}

// Multiplication by one fixed operator as four byte tables (it is linear in
// the register): four lookups instead of MultiplyModP's 32 steps.
class Shift {
 public:
  explicit Shift(size_t bytes) {
    const uint32_t op = ZerosOperator(bytes);
    for (int k = 0; k < 4; ++k) {
      for (uint32_t b = 0; b < 256; ++b) table_[k][b] = MultiplyModP(op, b << (8 * k));
    }
  }
  uint32_t operator()(uint32_t crc) const {
    return table_[0][crc & 0xFF] ^ table_[1][(crc >> 8) & 0xFF] ^ table_[2][(crc >> 16) & 0xFF] ^
           table_[3][crc >> 24];
  }

 private:
  uint32_t table_[4][256];
};

#if defined(__x86_64__)
// Three lanes of kLane bytes at once: the crc32 instruction has a latency of
// 3 cycles and a throughput of 1, so one dependent chain runs at a third of
// what the core can do. The lanes' registers are joined by moving each past
// the bytes of the lanes after it (ZerosOperator) and adding them.
constexpr size_t kLane = 4096;

__attribute__((target("sse4.2"))) uint64_t ThreeLanes(uint64_t c, const unsigned char* p) {
  static const Shift past_one(kLane), past_two(2 * kLane);
  uint64_t a = c, b = 0, d = 0;
  for (size_t i = 0; i < kLane; i += 8) {
    uint64_t wa, wb, wd;
    std::memcpy(&wa, p + i, 8);
    std::memcpy(&wb, p + kLane + i, 8);
    std::memcpy(&wd, p + 2 * kLane + i, 8);
    a = __builtin_ia32_crc32di(a, wa);
    b = __builtin_ia32_crc32di(b, wb);
    d = __builtin_ia32_crc32di(d, wd);
  }
  return past_two(static_cast<uint32_t>(a)) ^ past_one(static_cast<uint32_t>(b)) ^
         static_cast<uint32_t>(d);
}

__attribute__((target("sse4.2"))) uint32_t ExtendHardware(uint32_t crc, const unsigned char* p,
                                                          size_t n) {
  uint64_t c = ~crc;
  for (; n >= 3 * kLane; n -= 3 * kLane, p += 3 * kLane) c = ThreeLanes(c, p);
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = __builtin_ia32_crc32di(c, word);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = __builtin_ia32_crc32qi(c32, *p);
  return ~c32;
}

bool HasSse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (; bytes >= 8; bytes -= 8, p += 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);  // little-endian, like every target we build for
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
        kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
  }
  for (; bytes > 0; --bytes, ++p) c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xFF];
  return ~c;
}

uint32_t Crc32cCombine(uint32_t first, uint32_t second, size_t second_bytes) {
  return MultiplyModP(ZerosOperator(second_bytes), first) ^ second;
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t bytes) {
#if defined(__x86_64__)
  if (HasSse42()) return ExtendHardware(crc, static_cast<const unsigned char*>(data), bytes);
#endif
  return Crc32cExtendPortable(crc, data, bytes);
}

}  // namespace zero
