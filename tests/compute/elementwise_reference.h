// Independent references for the element-wise operations (optimizers/
// elementwise_op.h): one element at a time through base/dtype.h's
// conversions, the way zero/precision.cc's loops were written before the
// rules existed, and test buffers with guard bytes around the span.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "compute/elementwise_op.h"

namespace zero::testing {

// Bytes per element of a map's destination and source (0: no source).
size_t DstSize(ElementwiseKind kind, DType dtype);
size_t SrcSize(ElementwiseKind kind, DType dtype);

// Applies map `kind` to `count` elements, sequentially.
void ReferenceMap(ElementwiseKind kind, DType dtype, void* dst, const void* src, float scalar,
                  size_t count);
// fp64, in element order, from 0.
double ReferenceSumOfSquares(const void* src, DType dtype, size_t count);
bool ReferenceAnyNonFinite(const void* src, DType dtype, size_t count);

// Destination and source of one map over `count` elements that start
// `offset` elements into their buffers (an offset of 1 misaligns the span
// for every vector width), with guard elements after. Values are random,
// with inf, NaN, fp16 overflow and rounding ties sprinkled into the source.
struct MapBuffers {
  MapBuffers(ElementwiseKind kind, DType dtype, size_t count, size_t offset, uint32_t seed);

  // The operation over the span; `factor` is used by scale only.
  ElementwiseOp Op(float value, const float* factor);
  // The destination bytes after the reference ran on a copy.
  std::vector<uint8_t> Expected(float scalar) const;

  ElementwiseKind kind;
  DType dtype;
  size_t count, offset;
  std::vector<uint8_t> dst, src;  // whole buffers, guards included
};

}  // namespace zero::testing
