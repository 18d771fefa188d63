#include "bench/rank_group.h"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

#include "base/status_macros.h"
#include "bench/simulated_devices.h"
#include "optimizers/adam.h"

namespace zero {

absl::Status OnThreads(int n, const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> status(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { status[i] = fn(i); });
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

absl::Status RankGroup::OnRanks(const std::function<absl::Status(int)>& fn) {
  return OnThreads(size(), [&](int r) {
    absl::Status s = fn(r);
    if (!s.ok()) comms[r]->Abort(s);
    return s;
  });
}

absl::StatusOr<std::unique_ptr<RankGroup>> MakeRankGroup(int ranks, size_t device_bytes,
                                                         const EngineConfig& config,
                                                         const std::vector<ParamSpec>& params,
                                                         const LocalGroupOptions& comm) {
  auto g = std::make_unique<RankGroup>();
  ASSIGN_OR_RETURN(g->devices, DeviceSystem::Create(
                                   SimulatedDevices(DeviceSpec::Kind::kHost, ranks, device_bytes)));
  LocalGroupOptions options = comm;
  if (options.devices == nullptr) options.devices = g->devices.get();
  ASSIGN_OR_RETURN(g->comms, LocalGroup::Create(ranks, options));
  ASSIGN_OR_RETURN(g->adam, MakeAdamW());
  g->engines.resize(ranks);
  RETURN_IF_ERROR(g->OnRanks([&](int r) -> absl::Status {
    ASSIGN_OR_RETURN(g->engines[r], Engine::Create(config, params, g->adam.get(),
                                                   g->comms[r].get(), g->devices.get(), r));
    return absl::OkStatus();
  }));
  return g;
}

std::vector<ParamSpec> ModelSpecs(size_t h, int layers) {
  std::vector<ParamSpec> specs;
  for (int l = 0; l < layers; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    for (auto [name, numel] : {std::pair{"qkv.w", 3 * h * h}, {"qkv.b", 3 * h},
                               {"proj.w", h * h}, {"proj.b", h}, {"fc1.w", 4 * h * h},
                               {"fc1.b", 4 * h}, {"fc2.w", 4 * h * h}, {"fc2.b", h}}) {
      specs.push_back({p + name, numel, l});
    }
  }
  return specs;
}

absl::Status RankStep(Engine& e, const std::vector<float>& grad, size_t& peak,
                      absl::Duration forward) {
  const auto& params = e.layout().params();
  auto kernels = [&](int passes) -> absl::Status {
    if (forward == absl::ZeroDuration()) return absl::OkStatus();
    return e.stream()->Enqueue([t = passes * forward] { absl::SleepFor(t); });
  };
  for (int m = 0; m <= params.back().module; ++m) {
    RETURN_IF_ERROR(e.Fetch(m));
    peak = std::max(peak, e.live_gathered_elements());
    RETURN_IF_ERROR(kernels(1));
    RETURN_IF_ERROR(e.Release(m));
  }
  for (int id = static_cast<int>(params.size()) - 1; id >= 0; --id) {
    const bool first_of_module =
        id == static_cast<int>(params.size()) - 1 || params[id + 1].module != params[id].module;
    if (first_of_module) {
      RETURN_IF_ERROR(e.Fetch(params[id].module));
      RETURN_IF_ERROR(kernels(2));
    }
    peak = std::max(peak, e.live_gathered_elements());
    RETURN_IF_ERROR(e.AddGrad(id, grad.data(), params[id].numel));
    if (id == 0 || params[id - 1].module != params[id].module) {
      RETURN_IF_ERROR(e.Release(params[id].module));
    }
  }
  RETURN_IF_ERROR(e.Step());
  // Step is stream-ordered: it returns once the update is enqueued. A loop
  // reads its loss once a step (a host wait for the compute stream), so a
  // step ends when the stream has run it; the communication stream's
  // all-gathers after the update may still overlap the next forward.
  return e.stream()->Synchronize();
}

}  // namespace zero
