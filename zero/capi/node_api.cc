// The C functions of one node's shared range (zero_engine.h, ABI 1.4):
// devices inside it, the node communicator over it, and what it holds.
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "memory/node_backend.h"
#include "memory/node_range.h"
#include "memory/tag.h"
#include "zero/capi/guard.h"
#include "zero/comm/nccl_codes.h"
#include "zero/comm/node_communicator.h"

using zero::capi::Guard;
using zero::capi::Required;

namespace {

absl::Status PositiveTimeout(double seconds) {
  if (seconds > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat("timeout %g s: must be positive", seconds));
}

}  // namespace

int zero_devices_create_node(zero_devices_t* devices, const char* spec, int local_rank,
                             int local_world, const char* key, double timeout_seconds) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(devices, "devices"));
    *devices = nullptr;
    RETURN_IF_ERROR(Required(spec, "spec"));
    RETURN_IF_ERROR(Required(key, "key"));
    RETURN_IF_ERROR(PositiveTimeout(timeout_seconds));
    ASSIGN_OR_RETURN(const zero::DeviceSpec parsed, zero::ParseDeviceSpec(spec));
    if (parsed.kind != zero::DeviceSpec::Kind::kHost || parsed.count != 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "devices '%s' in a node range: one host device per process (\"host:1x64GiB\"); "
          "cards share theirs through NCCL",
          spec));
    }
    zero::NodeRangeOptions options;
    options.key = key;
    options.local_rank = local_rank;
    options.local_world = local_world;
    options.timeout = absl::Seconds(timeout_seconds);
    options.chunk = size_t{2} << 20;
    options.slice_bytes = zero::NodeSliceBytes(parsed.capacity, options.chunk);
    auto handle = std::make_unique<zero_devices>();
    ASSIGN_OR_RETURN(handle->node, zero::NodeRange::Join(options));
    ASSIGN_OR_RETURN(handle->system, zero::CreateNodeDevices(handle->node, parsed.capacity));
    *devices = handle.release();
    return absl::OkStatus();
  });
}

int zero_comm_create_node(zero_comm_t* comm, zero_devices_t devices, double timeout_seconds) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(comm, "comm"));
    *comm = nullptr;
    RETURN_IF_ERROR(Required(devices, "devices"));
    RETURN_IF_ERROR(PositiveTimeout(timeout_seconds));
    if (devices->node == nullptr) {
      return absl::FailedPreconditionError(
          "a node communicator needs devices from zero_devices_create_node");
    }
    ASSIGN_OR_RETURN(auto made, zero::MakeNodeCommunicator(devices->node, &devices->system->pool(0),
                                                           {absl::Seconds(timeout_seconds)}));
    *comm = new zero_comm{std::move(made)};
    return absl::OkStatus();
  });
}

int zero_devices_node_info(zero_devices_t devices, char* buffer, size_t size, size_t* needed) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(devices, "devices"));
    RETURN_IF_ERROR(Required(needed, "needed"));
    if (devices->node == nullptr) {
      return absl::FailedPreconditionError("these devices are not in a node range");
    }
    const zero::NodeRange& range = *devices->node;
    std::vector<size_t> announced;
    for (int l = 0; l < range.local_world(); ++l) announced.push_back(range.announced_bytes(l));
    const std::string json = absl::StrFormat(
        "{\"base\": %d, \"slice_bytes\": %d, \"virtual_bytes\": %d, \"local_rank\": %d, "
        "\"local_world\": %d, \"announced_bytes\": [%s]}",
        range.base(), range.slice_bytes(), range.virtual_bytes(), range.local_rank(),
        range.local_world(), absl::StrJoin(announced, ", "));
    return zero::capi::CopyOut(json, buffer, size, needed);
  });
}

int zero_devices_allocate(zero_devices_t devices, int device, size_t bytes, void** ptr) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(ptr, "ptr"));
    *ptr = nullptr;
    ASSIGN_OR_RETURN(zero::DevicePool* pool, zero::capi::PoolOf(devices, device));
    ASSIGN_OR_RETURN(*ptr, pool->Allocate(bytes, zero::Tag::kCommunication));
    return absl::OkStatus();
  });
}

int zero_devices_free(zero_devices_t devices, int device, void* ptr, size_t bytes) {
  return Guard([&]() -> absl::Status {
    ASSIGN_OR_RETURN(zero::DevicePool* pool, zero::capi::PoolOf(devices, device));
    return pool->Deallocate(ptr, bytes);
  });
}

int zero_comm_all_gather(zero_comm_t comm, const void* send, void* recv, size_t count, int dtype) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(comm, "comm"));
    ASSIGN_OR_RETURN(zero::DType type, zero::DTypeFromNccl(dtype));
    return comm->comm->AllGather(send, recv, count, type, nullptr);
  });
}

int zero_comm_reduce_scatter(zero_comm_t comm, const void* send, void* recv, size_t count,
                             int dtype, int op) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(comm, "comm"));
    ASSIGN_OR_RETURN(zero::DType type, zero::DTypeFromNccl(dtype));
    ASSIGN_OR_RETURN(zero::ReduceOp reduce, zero::ReduceOpFromNccl(op));
    return comm->comm->ReduceScatter(send, recv, count, type, reduce, nullptr);
  });
}

int zero_comm_all_reduce(zero_comm_t comm, const void* send, void* recv, size_t count, int dtype,
                         int op) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(comm, "comm"));
    ASSIGN_OR_RETURN(zero::DType type, zero::DTypeFromNccl(dtype));
    ASSIGN_OR_RETURN(zero::ReduceOp reduce, zero::ReduceOpFromNccl(op));
    return comm->comm->AllReduce(send, recv, count, type, reduce, nullptr);
  });
}
