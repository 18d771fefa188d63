// Block-wise quantization, written once for the CPU loops and the CUDA
// kernels (nvcc-compatible, no abseil), so both give the same bytes.
//
// A chunk of `count` elements is cut into blocks of `block` elements (the
// last may be shorter). Each block keeps one fp32 scale, absmax / qmax
// (qmax = 127 for 8 bits, 7 for 4), and each element the signed integer
// q = round(x / scale), clamped to [-qmax, qmax]; it reads back as q * scale.
// Rounding is to nearest, ties to even (error at most scale / 2 per
// element), or stochastic: floor(x / scale + u) with u in [0, 1) from a
// counter-based generator of (seed, element index), so reruns repeat and
// the mean error is zero. A block whose absmax is not finite keeps a NaN
// scale and reads back as NaN (an overflow stays visible to the loss
// scaler); an all-zero block reads back as zeros.
//
// The bytes of a quantized chunk: the blocks' fp32 scales, then the
// integers (int8 one per byte; int4 two per byte, the even element in the
// low nibble, two's complement), padded with zeros to a multiple of 4 bytes
// so a chunk travels as whole 4-byte words.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/host_device.h"

namespace zero {

struct QuantFormat {
  int bits = 8;         // 8 or 4
  size_t block = 2048;  // elements per scale (DeepSpeed's quantization group size)
  bool stochastic = false;
  uint64_t seed = 0;    // stochastic rounding only

  ZERO_HD int qmax() const { return bits == 4 ? 7 : 127; }
  bool operator==(const QuantFormat&) const = default;
};

ZERO_HD inline size_t QuantBlocks(size_t count, const QuantFormat& f) {
  return (count + f.block - 1) / f.block;
}
ZERO_HD inline size_t QuantPayloadBytes(size_t count, const QuantFormat& f) {
  return f.bits == 4 ? (count + 1) / 2 : count;
}
// Bytes of a quantized chunk of `count` elements (a multiple of 4).
ZERO_HD inline size_t QuantizedBytes(size_t count, const QuantFormat& f) {
  const size_t raw = 4 * QuantBlocks(count, f) + QuantPayloadBytes(count, f);
  return (raw + 3) / 4 * 4;
}

// SplitMix64 of (seed, index): 24 uniform bits as a float in [0, 1).
ZERO_HD inline float CounterUniform(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

// The scale of a block whose largest magnitude is `absmax`.
ZERO_HD inline float BlockScale(float absmax, const QuantFormat& f) {
  if (!(absmax - absmax == 0.0f)) return NAN;  // inf or NaN
  return absmax / static_cast<float>(f.qmax());
}

// The integer of `x` in a block of `scale`; `index` is the element's index
// for the stochastic generator.
ZERO_HD inline int QuantizeValue(float x, float scale, const QuantFormat& f, uint64_t index) {
  if (!(scale > 0)) return 0;  // zero block, or NaN scale (reads back NaN)
  const float v = x / scale;
  const float r = f.stochastic ? floorf(v + CounterUniform(f.seed, index)) : rintf(v);
  const float q = fminf(fmaxf(r, -static_cast<float>(f.qmax())), static_cast<float>(f.qmax()));
  return static_cast<int>(q);
}

ZERO_HD inline float DequantizeValue(int q, float scale) {
  return static_cast<float>(q) * scale;
}

// Element i's integer in a payload.
ZERO_HD inline int LoadQuantized(const uint8_t* payload, size_t i, int bits) {
  if (bits == 8) return static_cast<int8_t>(payload[i]);
  const int nibble = (payload[i / 2] >> (4 * (i & 1))) & 0xF;
  return nibble >= 8 ? nibble - 16 : nibble;
}

// Writes a pair (int4) or one (int8) integer; `second` is ignored for 8 bits.
ZERO_HD inline void StoreQuantizedPair(uint8_t* payload, size_t even_index, int first, int second,
                                       int bits) {
  if (bits == 8) {
    payload[even_index] = static_cast<uint8_t>(static_cast<int8_t>(first));
    return;
  }
  payload[even_index / 2] = static_cast<uint8_t>((first & 0xF) | ((second & 0xF) << 4));
}

ZERO_HD inline float* QuantScales(void* chunk) { return static_cast<float*>(chunk); }
ZERO_HD inline const float* QuantScales(const void* chunk) {
  return static_cast<const float*>(chunk);
}
ZERO_HD inline uint8_t* QuantPayload(void* chunk, size_t count, const QuantFormat& f) {
  return static_cast<uint8_t*>(chunk) + 4 * QuantBlocks(count, f);
}
ZERO_HD inline const uint8_t* QuantPayload(const void* chunk, size_t count,
                                           const QuantFormat& f) {
  return static_cast<const uint8_t*>(chunk) + 4 * QuantBlocks(count, f);
}

}  // namespace zero
