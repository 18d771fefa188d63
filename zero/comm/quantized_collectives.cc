#include "zero/comm/quantized_collectives.h"

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "compute/quantize.h"
#include "zero/comm/internal/stream_scratch.h"

namespace zero {
namespace {

const char* At(const void* base, size_t bytes) { return static_cast<const char*>(base) + bytes; }
char* At(void* base, size_t bytes) { return static_cast<char*>(base) + bytes; }

absl::Status Check(const QuantizedCollective& how) {
  if (how.stream == nullptr || how.scratch == nullptr) {
    return absl::InvalidArgumentError("quantized collective: stream and scratch must be given");
  }
  return ValidateQuantFormat(how.format);
}

// Chunk `index` (count elements) of `src` quantized into `dst`.
absl::Status QuantizeChunk(const QuantizedCollective& how, DType dtype, const void* src,
                           size_t index, size_t count, void* dst, float* residual) {
  return Quantize(how.kind, *how.stream,
                  {.dtype = dtype,
                   .count = count,
                   .src = At(src, index * count * SizeOf(dtype)),
                   .dst = dst,
                   .format = how.format,
                   .index_base = index * count,
                   .residual = residual != nullptr ? residual + index * count : nullptr});
}

absl::Status SumParts(const QuantizedCollective& how, DType dtype, const void* src, int parts,
                      size_t stride, size_t count, void* dst) {
  return DequantizeSum(how.kind, *how.stream,
                       {.dtype = dtype, .count = count, .parts = parts, .src = src, .dst = dst,
                        .format = how.format, .part_stride = stride});
}

// One level: a quantized chunk to each rank, summed in rank order.
absl::Status FlatReduceScatter(Communicator& comm, const void* send, void* recv, size_t count,
                               DType dtype, const QuantizedCollective& how, float* residual) {
  const int n = comm.world_size();
  const size_t q = QuantizedBytes(count, how.format);
  StreamScratch scratch(how.scratch, how.stream);
  ASSIGN_OR_RETURN(void* out, scratch.Get(n * q));
  ASSIGN_OR_RETURN(void* in, scratch.Get(n * q));
  for (int p = 0; p < n; ++p) {
    RETURN_IF_ERROR(QuantizeChunk(how, dtype, send, p, count, At(out, p * q), residual));
  }
  RETURN_IF_ERROR(comm.AllToAll(out, in, q / 4, DType::kF32, how.stream));
  return SumParts(how, dtype, in, n, q, count, recv);
}

// Two levels: node sums of each local rank's chunks inside the node, then
// those sums, quantized again, across (see the header).
absl::Status TwoLevelReduceScatter(const Communicator::Levels& levels, const void* send,
                                   void* recv, size_t count, DType dtype,
                                   const QuantizedCollective& how, float* residual) {
  const int g = levels.intra->world_size(), m = levels.inter->world_size();
  const size_t q = QuantizedBytes(count, how.format);
  StreamScratch scratch(how.scratch, how.stream);
  ASSIGN_OR_RETURN(void* out, scratch.Get(g * m * q));
  ASSIGN_OR_RETURN(void* in, scratch.Get(g * m * q));
  ASSIGN_OR_RETURN(void* node_sums, scratch.Get(m * count * sizeof(float)));
  ASSIGN_OR_RETURN(void* across_out, scratch.Get(m * q));
  ASSIGN_OR_RETURN(void* across_in, scratch.Get(m * q));
  // Local rank k gets, from each node block, the chunk of its place there.
  for (int node = 0; node < m; ++node) {
    for (int k = 0; k < g; ++k) {
      RETURN_IF_ERROR(QuantizeChunk(how, dtype, send, node * g + k, count,
                                    At(out, (k * m + node) * q), residual));
    }
  }
  RETURN_IF_ERROR(levels.intra->AllToAll(out, in, m * q / 4, DType::kF32, how.stream));
  QuantizedCollective again = how;
  again.format.seed = ~how.format.seed;  // the second rounding draws apart from the first
  for (int node = 0; node < m; ++node) {
    void* sum = At(node_sums, node * count * sizeof(float));
    RETURN_IF_ERROR(SumParts(how, DType::kF32, At(in, node * q), g, m * q, count, sum));
    RETURN_IF_ERROR(QuantizeChunk(again, DType::kF32, node_sums, node, count,
                                  At(across_out, node * q), nullptr));
  }
  RETURN_IF_ERROR(levels.inter->AllToAll(across_out, across_in, q / 4, DType::kF32, how.stream));
  return SumParts(how, dtype, across_in, m, q, count, recv);
}

}  // namespace

absl::Status QuantizedAllGather(Communicator& comm, const void* send, void* recv, size_t count,
                                DType dtype, const QuantizedCollective& how) {
  RETURN_IF_ERROR(Check(how));
  const int n = comm.world_size();
  const size_t q = QuantizedBytes(count, how.format);
  StreamScratch scratch(how.scratch, how.stream);
  ASSIGN_OR_RETURN(void* words, scratch.Get(n * q));
  // In place: this rank's chunk quantized where the gather puts it.
  if (count > 0) {
    RETURN_IF_ERROR(QuantizeChunk(how, dtype, send, 0, count, At(words, comm.rank() * q),
                                  nullptr));
  }
  RETURN_IF_ERROR(comm.AllGather(count > 0 ? At(words, comm.rank() * q) : nullptr, words, q / 4,
                                 DType::kF32, how.stream));
  for (int p = 0; p < n && count > 0; ++p) {
    RETURN_IF_ERROR(SumParts(how, dtype, At(words, p * q), 1, 0, count,
                             At(recv, p * count * SizeOf(dtype))));
  }
  return absl::OkStatus();
}

absl::Status QuantizedReduceScatter(Communicator& comm, const void* send, void* recv,
                                    size_t count, DType dtype, const QuantizedCollective& how,
                                    float* residual) {
  RETURN_IF_ERROR(Check(how));
  if (count == 0) return comm.AllToAll(nullptr, nullptr, 0, DType::kF32, how.stream);
  if (std::optional<Communicator::Levels> levels = comm.levels()) {
    return TwoLevelReduceScatter(*levels, send, recv, count, dtype, how, residual);
  }
  return FlatReduceScatter(comm, send, recv, count, dtype, how, residual);
}

}  // namespace zero
