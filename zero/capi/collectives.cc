#include "zero/capi/collectives.h"

#include <cstddef>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "zero/capi/guard.h"
#include "zero/comm/callback_communicator.h"
#include "zero/comm/nccl_codes.h"

namespace zero::capi {
namespace {

thread_local std::string collective_error;

// One C function's call: its return code and the text it left, as a status.
template <class CallFn>
absl::Status Run(CallFn call) {
  collective_error.clear();
  const int code = call();
  if (code == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat(
      "code %d%s%s", code, collective_error.empty() ? "" : ": ", collective_error));
}

// Only the functions given: CallbackCommunicator::Create names what is missing.
CallbackCollectives FromC(const zero_collectives& c) {
  CallbackCollectives fns;
  if (c.all_gather != nullptr) {
    fns.all_gather = [c](const void* send, void* recv, size_t n, DType dtype, void* stream) {
      return Run([&] { return c.all_gather(send, recv, n, NcclCode(dtype), c.user, stream); });
    };
  }
  if (c.reduce_scatter != nullptr) {
    fns.reduce_scatter = [c](const void* send, void* recv, size_t n, DType dtype, ReduceOp op,
                             void* stream) {
      return Run([&] {
        return c.reduce_scatter(send, recv, n, NcclCode(dtype), NcclCode(op), c.user, stream);
      });
    };
  }
  if (c.all_reduce != nullptr) {
    fns.all_reduce = [c](const void* send, void* recv, size_t n, DType dtype, ReduceOp op,
                         void* stream) {
      return Run([&] {
        return c.all_reduce(send, recv, n, NcclCode(dtype), NcclCode(op), c.user, stream);
      });
    };
  }
  if (c.broadcast != nullptr) {
    fns.broadcast = [c](const void* send, void* recv, size_t n, DType dtype, int root,
                        void* stream) {
      return Run([&] { return c.broadcast(send, recv, n, NcclCode(dtype), root, c.user, stream); });
    };
  }
  if (c.barrier != nullptr) {
    fns.barrier = [c](void* stream) { return Run([&] { return c.barrier(c.user, stream); }); };
  }
  if (c.size > offsetof(zero_collectives, all_to_all) && c.all_to_all != nullptr) {
    fns.all_to_all = [c](const void* send, void* recv, size_t n, DType dtype, void* stream) {
      return Run([&] { return c.all_to_all(send, recv, n, NcclCode(dtype), c.user, stream); });
    };
  }
  if (c.abort != nullptr) {
    fns.abort = [c](std::string_view reason) { c.abort(std::string(reason).c_str(), c.user); };
  }
  return fns;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> MakeCallbackCommunicator(
    int rank, int world_size, const zero_collectives& fns) {
  // ABI 1.2's struct ended before all_to_all.
  if (fns.size != offsetof(zero_collectives, all_to_all)) {
    RETURN_IF_ERROR(CheckStructSize("zero_collectives", fns.size, sizeof(zero_collectives)));
  }
  return CallbackCommunicator::Create(rank, world_size, FromC(fns));
}

void SetCollectiveError(std::string_view message) { collective_error.assign(message); }

}  // namespace zero::capi
