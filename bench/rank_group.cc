#include "bench/rank_group.h"

#include <thread>

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
  ASSIGN_OR_RETURN(g->comms, LocalGroup::Create(ranks, comm));
  ASSIGN_OR_RETURN(g->adam, MakeAdamW());
  g->engines.resize(ranks);
  RETURN_IF_ERROR(g->OnRanks([&](int r) -> absl::Status {
    ASSIGN_OR_RETURN(g->engines[r], Engine::Create(config, params, g->adam.get(),
                                                   g->comms[r].get(), g->devices.get(), r));
    return absl::OkStatus();
  }));
  return g;
}

}  // namespace zero
