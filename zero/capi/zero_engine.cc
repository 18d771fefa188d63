// The C functions of libzero_engine.so over Engine, DeviceSystem and the
// communicators: each turns its arguments into C++ calls, its status into
// an int and a thread-local text, and lets no exception cross the boundary.
#include "zero/capi/zero_engine.h"

#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/json.h"
#include "base/status_macros.h"
#include "memory/device_system.h"
#include "optimizers/grouped_optimizer.h"
#include "zero/capi/collectives.h"
#include "zero/capi/guard.h"
#include "zero/comm/hierarchical_communicator.h"
#include "zero/comm/local_communicator.h"
#include "zero/comm/nccl_codes.h"
#include "zero/comm/ordered_reduce.h"
#include "zero/config_json.h"
#include "zero/engine.h"
#include "zero/layout.h"

namespace zero {
namespace {

using capi::Required;

// The header's codes are the one NCCL code table's.
static_assert(NcclCode(DType::kF16) == ZERO_F16 && NcclCode(DType::kF32) == ZERO_F32 &&
              NcclCode(DType::kBF16) == ZERO_BF16);
static_assert(NcclCode(ReduceOp::kSum) == ZERO_SUM && NcclCode(ReduceOp::kMax) == ZERO_MAX &&
              NcclCode(ReduceOp::kAvg) == ZERO_AVG);

// The engine's parameters, and in `groups` each one's optimizer group
// (checked against the `group_count` configured).
absl::StatusOr<std::vector<ParamSpec>> Specs(const zero_param_spec* params, int n,
                                             int group_count, std::vector<int>& groups) {
  if (n < 0 || (n > 0 && params == nullptr)) {
    return absl::InvalidArgumentError(absl::StrFormat("%d parameters at %p", n, params));
  }
  std::vector<ParamSpec> specs;
  for (int i = 0; i < n; ++i) {
    // Checked before anything else of the element is read (params[i + 1]
    // is where it is only when the caller's struct is this library's).
    RETURN_IF_ERROR(Annotate(
        capi::CheckStructSize("zero_param_spec", params[i].size, sizeof(zero_param_spec)),
        absl::StrFormat("params[%d]", i)));
    if (params[i].name == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat("parameter %d has no name", i));
    }
    if (params[i].group < 0 || params[i].group >= group_count) {
      return absl::InvalidArgumentError(
          absl::StrFormat("parameter '%s' is in group %d; %d groups are configured",
                          params[i].name, params[i].group, group_count));
    }
    specs.push_back({params[i].name, params[i].numel, params[i].module});
    groups.push_back(params[i].group);
  }
  return specs;
}

// Each parameter's flat elements (and the padding after it) go to its group.
std::vector<GroupRange> GroupRanges(const Layout& layout, const std::vector<int>& groups) {
  std::vector<GroupRange> ranges;
  for (const ParamExtent& e : layout.ParamExtents()) {
    ranges.push_back({e.begin, e.end, groups[e.param]});
  }
  return ranges;
}

absl::Status CreateEngine(zero_engine_t* out, const char* config_json,
                          const zero_param_spec* params, int num_params, zero_comm_t comm,
                          zero_devices_t devices, int device) {
  RETURN_IF_ERROR(Required(out, "engine"));
  *out = nullptr;
  RETURN_IF_ERROR(Required(config_json, "config_json"));
  RETURN_IF_ERROR(Required(comm, "comm"));
  RETURN_IF_ERROR(Required(devices, "devices"));
  if (comm->comm == nullptr) {
    return absl::FailedPreconditionError(
        "comm was emptied into a hierarchical communicator: pass that one");
  }
  std::vector<int> groups;
  absl::StatusOr<EngineSetup> setup = ParseEngineSetup(config_json);
  absl::StatusOr<std::vector<ParamSpec>> specs =
      setup.ok() ? Specs(params, num_params, setup->optimizer.size(), groups) : setup.status();
  absl::StatusOr<std::unique_ptr<GroupedOptimizer>> optimizer =
      specs.ok() ? GroupedOptimizer::Create(setup->optimizer) : specs.status();
  if (!optimizer.ok()) {
    // The peers are about to wait for this rank in Engine::Create.
    comm->comm->Abort(optimizer.status());
    return optimizer.status();
  }
  auto handle = std::make_unique<zero_engine>();
  handle->optimizer = *std::move(optimizer);
  handle->comm = comm->comm.get();
  handle->devices = devices->system.get();
  ASSIGN_OR_RETURN(handle->engine,
                   Engine::Create(setup->config, *std::move(specs), handle->optimizer.get(),
                                  comm->comm.get(), devices->system.get(), device));
  RETURN_IF_ERROR(handle->optimizer->Bind(GroupRanges(handle->engine->layout(), groups)));
  *out = handle.release();
  return absl::OkStatus();
}

std::string StatsJson(const Engine& engine) {
  const EngineStats s = engine.stats();
  const Layout& layout = engine.layout();
  std::string out = absl::StrFormat(
      "{\"steps\":%d,\"skipped_steps\":%d,\"loss_scale\":%.17g,\"last_grad_norm\":%.17g,"
      "\"micro_batches\":%d,\"host_bytes\":%d,\"peak_host_bytes\":%d,"
      "\"early_unit_updates\":%d,\"live_gathered_elements\":%d,\"params\":%d,\"numel\":%d,"
      "\"padded_numel\":%d,\"shard_numel\":%d,\"world_size\":%d,\"stage\":%d,\"pool\":%s,"
      "\"comm\":{",
      s.steps, s.skipped_steps, s.loss_scale, s.last_grad_norm, s.micro_batches, s.host_bytes,
      s.peak_host_bytes, s.early_unit_updates, engine.live_gathered_elements(),
      layout.params().size(), layout.numel(), layout.padded_numel(), layout.shard_numel(),
      layout.world_size(), engine.config().stage, PoolStatsJson(s.pool));
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    const OpStats& op = s.comm.by_kind[k];
    absl::StrAppendFormat(&out, "%s\"%s\":{\"calls\":%d,\"bytes_sent\":%d,\"bytes_received\":%d}",
                          k == 0 ? "" : ",", Name(static_cast<CollectiveKind>(k)), op.calls,
                          op.bytes_sent, op.bytes_received);
  }
  // The bytes by level of the link (comm_stats.h): inside a node, across nodes.
  absl::StrAppendFormat(&out,
                        "},\"levels\":{\"inside\":{\"bytes_sent\":%d,\"bytes_received\":%d},"
                        "\"across\":{\"bytes_sent\":%d,\"bytes_received\":%d}",
                        s.comm.inside.sent, s.comm.inside.received, s.comm.across.sent,
                        s.comm.across.received);
  out += "},\"stream_ops\":{";
  const auto window = [](const char* name, const StreamOps& o) {
    return absl::StrFormat("\"%s\":{\"enqueued\":%d,\"host_waits\":%d,\"driver_calls\":%d}",
                           name, o.enqueued, o.host_waits, o.driver_calls);
  };
  absl::StrAppend(&out, window("step", s.stream_ops.step), ",",
                  window("max_micro_batch", s.stream_ops.max_micro_batch), ",",
                  window("step_call", s.stream_ops.step_call), "}}");
  return out;
}

}  // namespace
}  // namespace zero

using zero::capi::Guard;
using zero::capi::Required;

extern "C" {

int zero_engine_abi_version(int* major, int* minor) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(major, "major"));
    RETURN_IF_ERROR(Required(minor, "minor"));
    *major = ZERO_ABI_VERSION_MAJOR;
    *minor = ZERO_ABI_VERSION_MINOR;
    return absl::OkStatus();
  });
}

const char* zero_engine_last_error(void) { return zero::capi::LastError().c_str(); }

const char* zero_engine_build_info(void) {
#ifdef __OPTIMIZE__
#define ZERO_OPTIMIZED "true"
#else
#define ZERO_OPTIMIZED "false"
#endif
#ifdef NDEBUG
#define ZERO_ASSERTIONS "false"
#else
#define ZERO_ASSERTIONS "true"
#endif
  return "{\"optimized\": " ZERO_OPTIMIZED ", \"assertions\": " ZERO_ASSERTIONS "}";
#undef ZERO_OPTIMIZED
#undef ZERO_ASSERTIONS
}

int zero_devices_create(zero_devices_t* devices, const char* spec) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(devices, "devices"));
    *devices = nullptr;
    absl::StatusOr<zero::DeviceSpec> parsed = spec == nullptr || *spec == '\0'
                                                  ? zero::DeviceSpecFromEnvironment()
                                                  : zero::ParseDeviceSpec(spec);
    RETURN_IF_ERROR(parsed.status());
    auto handle = std::make_unique<zero_devices>();
    ASSIGN_OR_RETURN(handle->system, zero::DeviceSystem::Create(*parsed));
    *devices = handle.release();
    return absl::OkStatus();
  });
}

int zero_devices_count(zero_devices_t devices, int* count) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(devices, "devices"));
    RETURN_IF_ERROR(Required(count, "count"));
    *count = devices->system->device_count();
    return absl::OkStatus();
  });
}

int zero_devices_destroy(zero_devices_t devices) {
  return Guard([&] {
    delete devices;
    return absl::OkStatus();
  });
}

int zero_comm_create_local(zero_comm_t* comms, int world_size, double timeout_seconds,
                           zero_devices_t devices) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(comms, "comms"));
    if (!(timeout_seconds > 0)) {
      return absl::InvalidArgumentError(absl::StrFormat("timeout %g s", timeout_seconds));
    }
    zero::LocalGroup::Options options;
    options.timeout = absl::Seconds(timeout_seconds);
    if (devices != nullptr) options.devices = devices->system.get();
    ASSIGN_OR_RETURN(auto group, zero::LocalGroup::Create(world_size, options));
    for (int r = 0; r < world_size; ++r) {
      comms[r] = new zero_comm{std::move(group[r])};
    }
    return absl::OkStatus();
  });
}

int zero_comm_create(zero_comm_t* comm, int rank, int world_size,
                     const zero_collectives* collectives) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(comm, "comm"));
    *comm = nullptr;
    RETURN_IF_ERROR(Required(collectives, "collectives"));
    ASSIGN_OR_RETURN(auto made,
                     zero::capi::MakeCallbackCommunicator(rank, world_size, *collectives));
    *comm = new zero_comm{std::move(made)};
    return absl::OkStatus();
  });
}

void zero_comm_set_error(const char* message) {
  zero::capi::SetCollectiveError(message == nullptr ? "" : message);
}

int zero_reduce_in_rank_order(const void* chunks, int world_size, size_t count, int dtype,
                              int op, void* out) {
  return Guard([&]() -> absl::Status {
    ASSIGN_OR_RETURN(zero::DType type, zero::DTypeFromNccl(dtype));
    ASSIGN_OR_RETURN(zero::ReduceOp reduce, zero::ReduceOpFromNccl(op));
    return zero::ReduceInRankOrder(type, reduce, chunks, world_size, count, out);
  });
}

int zero_comm_create_hierarchical(zero_comm_t* comm, int rank, int ranks_per_node,
                                  zero_comm_t intra, zero_comm_t inter, zero_devices_t devices,
                                  int device) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(comm, "comm"));
    *comm = nullptr;
    RETURN_IF_ERROR(Required(intra, "intra"));
    RETURN_IF_ERROR(Required(inter, "inter"));
    if (intra->comm == nullptr || inter->comm == nullptr) {
      return absl::FailedPreconditionError("intra or inter was already used by another communicator");
    }
    ASSIGN_OR_RETURN(zero::DevicePool* const pool, zero::capi::PoolOf(devices, device));
    const int world = ranks_per_node * inter->comm->world_size();
    ASSIGN_OR_RETURN(const zero::Topology topology, zero::Topology::Create(world, ranks_per_node));
    // Checked before anything moves: on an error both handles stay whole.
    if (intra->comm->world_size() != ranks_per_node ||
        intra->comm->rank() != topology.local_rank(rank) ||
        inter->comm->rank() != topology.node_of(rank)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "rank %d with %d ranks per node: intra is rank %d of %d, inter rank %d of %d", rank,
          ranks_per_node, intra->comm->rank(), intra->comm->world_size(), inter->comm->rank(),
          inter->comm->world_size()));
    }
    ASSIGN_OR_RETURN(auto made, zero::MakeHierarchicalCommunicator(
                                    topology, rank, std::move(intra->comm),
                                    std::move(inter->comm), pool));
    *comm = new zero_comm{std::move(made)};
    return absl::OkStatus();
  });
}

int zero_comm_destroy(zero_comm_t comm) {
  return Guard([&] {
    delete comm;
    return absl::OkStatus();
  });
}

int zero_engine_create(zero_engine_t* engine, const char* config_json,
                       const zero_param_spec* params, int num_params, zero_comm_t comm,
                       zero_devices_t devices, int device) {
  return Guard([&] {
    return zero::CreateEngine(engine, config_json, params, num_params, comm, devices, device);
  });
}

int zero_engine_destroy(zero_engine_t engine) {
  return Guard([&] {
    delete engine;
    return absl::OkStatus();
  });
}

int zero_engine_param(zero_engine_t engine, int param, void** data, size_t* numel, int* dtype) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    RETURN_IF_ERROR(Required(data, "data"));
    ASSIGN_OR_RETURN(zero::Engine::ParamView view, engine->engine->param_view(param));
    *data = view.data;
    if (numel != nullptr) *numel = view.numel;
    if (dtype != nullptr) *dtype = zero::NcclCode(view.dtype);
    return absl::OkStatus();
  });
}

int zero_engine_set_param(zero_engine_t engine, int param, const float* values, size_t numel) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    if (numel > 0) RETURN_IF_ERROR(Required(values, "values"));
    return engine->engine->SetParam(param, {values, numel});
  });
}

int zero_engine_fetch(zero_engine_t engine, int module) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    return engine->engine->Fetch(module);
  });
}

int zero_engine_wait_fetched(zero_engine_t engine, int module) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    return engine->engine->AwaitFetchedOnHost(module);
  });
}

int zero_engine_release(zero_engine_t engine, int module) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    return engine->engine->Release(module);
  });
}

int zero_engine_add_grad(zero_engine_t engine, int param, const void* grad, size_t numel,
                         int dtype) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    ASSIGN_OR_RETURN(zero::DType type, zero::DTypeFromNccl(dtype));
    // The gradient is on the engine's device (the package checks): on a
    // card, card memory of torch's allocator, read in stream order; on host
    // devices, ordinary host memory, staged.
    zero::Engine& e = *engine->engine;
    return e.AddGrad(param, grad, numel, type, nullptr,
                     e.stream()->is_card() ? zero::Engine::GradSource::kDevice
                                           : zero::Engine::GradSource::kAuto);
  });
}

int zero_engine_step(zero_engine_t engine) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    return engine->engine->Step();
  });
}

int zero_engine_zero_grad(zero_engine_t engine) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    return engine->engine->ZeroGrad();
  });
}

int zero_engine_set_lr(zero_engine_t engine, int group, double lr) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    // Offload's worker may be stepping this step's units with the old lr.
    RETURN_IF_ERROR(engine->engine->OwnedStateSettled("a change of the learning rate"));
    return engine->optimizer->SetGroupLr(group, lr);
  });
}

int zero_engine_stream(zero_engine_t engine, void** stream) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    RETURN_IF_ERROR(Required(stream, "stream"));
    *stream = engine->engine->stream()->native_handle();
    return absl::OkStatus();
  });
}

int zero_engine_synchronize(zero_engine_t engine) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    RETURN_IF_ERROR(engine->engine->comm_stream()->Synchronize());
    RETURN_IF_ERROR(engine->engine->stream()->Synchronize());
    // A collective that failed after its call returned (a gather after
    // Step, a prefetch): what was just waited for is not what it should be.
    return engine->comm->AsyncError();
  });
}

int zero_engine_loss_scale(zero_engine_t engine, double* scale) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    RETURN_IF_ERROR(Required(scale, "scale"));
    *scale = engine->engine->loss_scale();
    return absl::OkStatus();
  });
}

int zero_engine_stats_json(zero_engine_t engine, char* buffer, size_t size, size_t* needed) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    RETURN_IF_ERROR(Required(needed, "needed"));
    return zero::capi::CopyOut(zero::StatsJson(*engine->engine), buffer, size, needed);
  });
}

}  // extern "C"
