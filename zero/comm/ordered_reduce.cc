#include "zero/comm/ordered_reduce.h"

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_format.h"
#include "compute/parallel.h"
#include "zero/comm/internal/host_reduce.h"

namespace zero {

absl::Status ReduceInRankOrder(DType dtype, ReduceOp op, const void* chunks, int world,
                               size_t count, void* out) {
  if (world < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("ordered reduce: world size %d", world));
  }
  if (count == 0) return absl::OkStatus();
  if (chunks == nullptr || out == nullptr) {
    return absl::InvalidArgumentError("ordered reduce: null chunks or output");
  }
  const size_t esize = SizeOf(dtype);
  const char* base = static_cast<const char*>(chunks);
  // Each element is read from every chunk before it is written, in any
  // split of [0, count): in place stays safe, and the bits do not depend on
  // how many threads took part.
  ParallelFor(count, [&](size_t begin, size_t end) {
    absl::InlinedVector<const void*, 16> sources;
    for (int r = 0; r < world; ++r) sources.push_back(base + (r * count + begin) * esize);
    HostReduce(dtype, op, sources, static_cast<char*>(out) + begin * esize, end - begin);
  });
  return absl::OkStatus();
}

}  // namespace zero
