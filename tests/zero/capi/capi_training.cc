#include "tests/zero/capi/capi_training.h"

#include <thread>

#include "absl/strings/str_format.h"
#include "zero/capi/zero_engine.h"
#include "zero/comm/local_communicator.h"
#include "zero/comm/nccl_codes.h"
#include "zero/precision.h"

namespace zero::testing_model {
namespace {

const char* DTypeName(DType t) {
  return t == DType::kF32 ? "f32" : t == DType::kBF16 ? "bf16" : "f16";
}

const char* OffloadName(Offload o) {
  return o == Offload::kNone ? "none" : o == Offload::kOptimizer ? "optimizer" : "parameters";
}

// Collectives that forward to a C++ communicator (`user`): the C ABI's
// callback path with the local backend's arithmetic behind it. Codes come
// from the engine, so they are valid.
DType ToDType(int code) { return *DTypeFromNccl(code); }
ReduceOp ToOp(int code) { return *ReduceOpFromNccl(code); }
int Code(const absl::Status& s) {
  if (!s.ok()) zero_comm_set_error(std::string(s.message()).c_str());
  return static_cast<int>(s.code());
}
zero_collectives Forwarding(Communicator* comm) {
  zero_collectives fns{};
  fns.size = sizeof fns;
  fns.user = comm;
  fns.all_gather = [](const void* send, void* recv, size_t n, int dtype, void* user, void*) {
    return Code(static_cast<Communicator*>(user)->AllGather(send, recv, n, ToDType(dtype), nullptr));
  };
  fns.reduce_scatter = [](const void* send, void* recv, size_t n, int dtype, int op, void* user,
                          void*) {
    return Code(static_cast<Communicator*>(user)->ReduceScatter(send, recv, n, ToDType(dtype),
                                                                ToOp(op), nullptr));
  };
  fns.all_reduce = [](const void* send, void* recv, size_t n, int dtype, int op, void* user,
                      void*) {
    return Code(static_cast<Communicator*>(user)->AllReduce(send, recv, n, ToDType(dtype),
                                                            ToOp(op), nullptr));
  };
  fns.broadcast = [](const void* send, void* recv, size_t n, int dtype, int root, void* user,
                     void*) {
    return Code(
        static_cast<Communicator*>(user)->Broadcast(send, recv, n, ToDType(dtype), root, nullptr));
  };
  fns.barrier = [](void* user, void*) {
    return Code(static_cast<Communicator*>(user)->Barrier(nullptr));
  };
  fns.abort = [](const char* reason, void* user) {
    static_cast<Communicator*>(user)->Abort(absl::AbortedError(reason));
  };
  return fns;
}

// The parameters of every module in turn, widened to fp32.
int ReadParams(const Model& model, zero_engine_t engine, ParamSet& out) {
  out.assign(model.params().size(), {});
  for (int m = 0; m < static_cast<int>(model.modules().size()); ++m) {
    if (int rc = zero_engine_fetch(engine, m)) return rc;
    // The header's contract on host devices: the host waits for the engine
    // after fetch (the gathers may still run on its streams).
    if (int rc = zero_engine_synchronize(engine)) return rc;
    for (size_t id = 0; id < out.size(); ++id) {
      if (model.params()[id].module != m) continue;
      void* data;
      size_t numel;
      int dtype;
      if (int rc = zero_engine_param(engine, id, &data, &numel, &dtype)) return rc;
      out[id].resize(numel);
      Widen(data, ToDType(dtype), out[id].data(), numel);
    }
    if (int rc = zero_engine_release(engine, m)) return rc;
  }
  return 0;
}

// Forward, backward and step through the C ABI (as TrainSteps does).
absl::Status Train(const Model& model, const CapiRun& capi, zero_engine_t engine, int rank) {
  const TrainingRun& run = capi.run;
  const DType dtype = run.config.param_dtype;
  auto check = [](int rc) {
    return rc == 0 ? absl::OkStatus() : absl::InternalError(zero_engine_last_error());
  };
  ParamSet wide(model.params().size());
  ParamReader reader = [&](int id) -> std::span<const float> {
    void* data;
    size_t numel;
    int code;
    if (zero_engine_param(engine, id, &data, &numel, &code) != 0) return {};
    wide[id].resize(numel);
    Widen(data, dtype, wide[id].data(), numel);
    return wide[id];
  };
  Hooks hooks;
  hooks.pre_forward = hooks.pre_backward = [&](int m) {
    if (absl::Status s = check(zero_engine_fetch(engine, m)); !s.ok()) return s;
    return check(zero_engine_synchronize(engine));  // before the model reads the parameters
  };
  hooks.post_forward = hooks.post_backward = [&](int m) {
    return check(zero_engine_release(engine, m));
  };
  std::vector<char> narrow;
  hooks.on_grad = [&](int id, std::span<const float> grad) {
    double scale = 1;
    if (int rc = zero_engine_loss_scale(engine, &scale)) return check(rc);
    std::vector<float> scaled(grad.begin(), grad.end());
    for (float& g : scaled) g *= static_cast<float>(scale);
    narrow.resize(scaled.size() * SizeOf(dtype));
    Narrow(scaled.data(), narrow.data(), dtype, scaled.size());
    return check(zero_engine_add_grad(engine, id, narrow.data(), scaled.size(), NcclCode(dtype)));
  };
  for (int step = 0; step < run.steps; ++step) {
    for (int micro = 0; micro < run.config.gradient_accumulation_steps; ++micro) {
      const Batch batch = model.MakeBatch(BatchSeed(run.seed, rank, step, micro));
      absl::StatusOr<float> loss = model.ForwardBackward(reader, batch, hooks);
      if (!loss.ok()) return loss.status();
    }
    if (capi.before_step) {
      if (absl::Status s = check(capi.before_step(rank, engine)); !s.ok()) return s;
    }
    if (absl::Status s = check(zero_engine_step(engine)); !s.ok()) return s;
    if (absl::Status s = check(zero_engine_synchronize(engine)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void RunRank(const Model& model, const CapiRun& capi, zero_comm_t comm, zero_devices_t devices,
             int rank, CapiResult& out) {
  auto fail = [&](int rc) {
    out.code = rc;
    out.error = zero_engine_last_error();
  };
  std::vector<zero_param_spec> specs;
  for (size_t i = 0; i < model.params().size(); ++i) {
    const ParamInfo& p = model.params()[i];
    specs.push_back({sizeof(zero_param_spec), p.name.c_str(), p.numel, p.module,
                     capi.groups.empty() ? 0 : capi.groups[i]});
  }
  const std::string config = ConfigJson(capi.run.config, capi.optimizer);
  zero_engine_t engine = nullptr;
  if (int rc = zero_engine_create(&engine, config.c_str(), specs.data(), specs.size(), comm,
                                  devices, rank)) {
    return fail(rc);
  }
  absl::StatusOr<ParamSet> initial = InitialParams(model, capi.run.seed);
  for (size_t id = 0; id < initial->size(); ++id) {
    if (int rc = zero_engine_set_param(engine, id, (*initial)[id].data(), (*initial)[id].size())) {
      fail(rc);
    }
  }
  if (out.code == 0 && capi.before_training) {
    if (int rc = capi.before_training(rank, engine)) fail(rc);
  }
  if (out.code == 0) {
    if (absl::Status s = Train(model, capi, engine, rank); !s.ok()) {
      out.code = static_cast<int>(s.code());
      out.error = std::string(s.message());
    }
  }
  if (out.code == 0) {
    if (int rc = ReadParams(model, engine, out.params)) fail(rc);
  }
  zero_engine_destroy(engine);
}

}  // namespace

std::string ConfigJson(const EngineConfig& c, const std::string& optimizer) {
  std::string nvme;  // the path is the test's own folder: nothing to escape
  if (c.offload_device == OffloadDevice::kNvme) {
    nvme = absl::StrFormat(
        "\"offload_device\": \"nvme\", \"nvme_path\": \"%s\", \"nvme_chunk_elements\": %d, ",
        c.nvme_path, c.nvme_chunk_elements);
  }
  return absl::StrFormat(
      "{\"stage\": %d, \"gradient_accumulation_steps\": %d, \"bucket_elements\": %d, "
      "\"max_grad_norm\": %.17g, \"param_dtype\": \"%s\", \"offload\": \"%s\", %s"
      "\"offload_overlap\": %s, \"prefetch_elements\": %d, \"max_live_elements\": %d, "
      "\"max_reuse_distance\": %d, \"persistence_threshold\": %d, \"optimizer\": %s}",
      c.stage, c.gradient_accumulation_steps, c.bucket_elements, c.max_grad_norm,
      DTypeName(c.param_dtype), OffloadName(c.offload), nvme, c.offload_overlap ? "true" : "false",
      c.prefetch_elements, c.max_live_elements, c.max_reuse_distance, c.persistence_threshold,
      optimizer);
}

std::vector<CapiResult> TrainWithCapi(const Model& model, const CapiRun& capi) {
  const int world = capi.run.world;
  std::vector<CapiResult> results(world);
  zero_devices_t devices = nullptr;
  const std::string spec = absl::StrFormat("host:%dx256MiB", world);
  if (int rc = zero_devices_create(&devices, spec.c_str())) {
    for (CapiResult& r : results) r = {rc, zero_engine_last_error(), {}};
    return results;
  }
  std::vector<zero_comm_t> comms(world);
  // Over callbacks, the local group lives on the C++ side behind them.
  LocalGroup::Options options;
  options.timeout = absl::Seconds(20);
  std::vector<std::unique_ptr<Communicator>> local;
  if (capi.over_callbacks) {
    local = *LocalGroup::Create(world, options);
    for (int r = 0; r < world; ++r) {
      const zero_collectives fns = Forwarding(local[r].get());
      (void)zero_comm_create(&comms[r], r, world, &fns);
    }
  } else {
    (void)zero_comm_create_local(comms.data(), world, 20, devices);
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] { RunRank(model, capi, comms[r], devices, r, results[r]); });
  }
  for (std::thread& t : threads) t.join();
  for (zero_comm_t c : comms) zero_comm_destroy(c);
  zero_devices_destroy(devices);
  return results;
}

}  // namespace zero::testing_model
