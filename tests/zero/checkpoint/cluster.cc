#include "tests/zero/checkpoint/cluster.h"

#include <algorithm>
#include <span>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "zero/checkpoint/internal/chunk_plan.h"
#include "zero/comm/local_communicator.h"

namespace zero::testing_model {
namespace {

// Ranks that fail to open a file at the same moment (a missing or damaged
// checkpoint) format errno at once. abseil's strerror table is a function-
// local static in an uninstrumented library, whose guard TSan cannot see:
// build it at load time, before any rank's thread.
const absl::Status kStrErrorWarmUp = absl::ErrnoToStatus(ENOENT, "warm-up");

}  // namespace

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Create(const Model& model, const TrainingRun& run,
                                                         const OptimizerFactory& optimizer) {
  std::unique_ptr<Cluster> c(new Cluster(model, run));
  ASSIGN_OR_RETURN(c->devices_, DeviceSystem::Create({run.kind, run.world, run.capacity}));
  LocalGroup::Options options;
  options.timeout = absl::Seconds(20);
  options.devices = c->devices_.get();
  options.ranks_per_node = run.ranks_per_node;
  options.hierarchical = run.hierarchical;
  ASSIGN_OR_RETURN(c->comms_, LocalGroup::Create(run.world, options));
  ASSIGN_OR_RETURN(c->optimizer_, optimizer());
  c->engines_.resize(run.world);
  RETURN_IF_ERROR(AllOk(c->Run([&](int rank) -> absl::Status {
    ASSIGN_OR_RETURN(c->engines_[rank],
                     Engine::Create(run.config, SpecsOf(model), c->optimizer_.get(),
                                    c->comms_[rank].get(), c->devices_.get(), rank));
    return SetInitialParams(model, run.seed, *c->engines_[rank]);
  })));
  return c;
}

Cluster::~Cluster() { engines_.clear(); }

checkpoint::Participant Cluster::participant(int rank) {
  return {*engines_[rank], *optimizer_, *comms_[rank], *devices_};
}

std::vector<absl::Status> Cluster::Run(const std::function<absl::Status(int rank)>& fn) {
  std::vector<absl::Status> statuses(run_.world);
  std::vector<std::thread> threads;
  for (int r = 0; r < run_.world; ++r) {
    threads.emplace_back([&, r] { statuses[r] = fn(r); });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

absl::Status Cluster::Train(int from, int to) {
  TrainingRun run = run_;
  run.steps = to;
  return AllOk(Run([&](int rank) {
    std::vector<float> losses;
    return TrainSteps(model_, run, *engines_[rank], rank, from, losses);
  }));
}

std::vector<absl::Status> Cluster::Save(const std::string& root,
                                        const checkpoint::SaveOptions& options) {
  return Run([&](int rank) { return checkpoint::Save(participant(rank), root, options).status(); });
}

std::vector<absl::Status> Cluster::Load(const std::string& path) {
  return Run([&](int rank) { return checkpoint::Load(participant(rank), path); });
}

absl::StatusOr<std::vector<ParamSet>> Cluster::Params() {
  std::vector<ParamSet> params(run_.world);
  RETURN_IF_ERROR(AllOk(Run([&](int rank) -> absl::Status {
    ASSIGN_OR_RETURN(params[rank], ReadParams(model_, *engines_[rank]));
    return absl::OkStatus();
  })));
  return params;
}

absl::Status Cluster::CopyOwnedPieces(int rank, ModelStates& into) {
  Engine& engine = *engines_[rank];
  const Layout& layout = engine.layout();
  RETURN_IF_ERROR(engine.stream()->Synchronize());
  // Wherever the state lives (device, pinned host, NVMe file): host devices
  // here, so every plane StreamOwnedState hands over is readable.
  for (const checkpoint::OwnedRun& run : checkpoint::OwnedRuns(layout, rank)) {
    const size_t in_piece = run.shard_index - layout.units()[run.unit].shard_offset;
    RETURN_IF_ERROR(engine.owned_state().Stream(
        run.unit, in_piece, run.end - run.begin, OwnedStateAccess::Access::kRead,
        [&](size_t offset, size_t count, std::span<float* const> planes) -> absl::Status {
          for (size_t b = 0; b < planes.size(); ++b) {
            std::copy_n(planes[b], count,
                        into[b][run.param].data() + run.begin + (offset - in_piece));
          }
          return absl::OkStatus();
        }));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelStates> Cluster::States() {
  ModelStates states(1 + optimizer_->state_buffers());
  for (ParamSet& buffer : states) {
    for (const ParamInfo& p : model_.params()) buffer.emplace_back(p.numel, 0.0f);
  }
  for (int r = 0; r < run_.world; ++r) RETURN_IF_ERROR(CopyOwnedPieces(r, states));
  return states;
}

absl::Status AllOk(const std::vector<absl::Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (!statuses[r].ok()) {
      return absl::Status(statuses[r].code(),
                          absl::StrCat("[rank ", r, "] ", statuses[r].message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelStates> ReferenceFrom(const Model& model, ModelStates states, int from, int to,
                                          int world, int gas, uint64_t seed,
                                          const OptimizerFactory& make_optimizer) {
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, make_optimizer());
  ParamSet& params = states[0];
  for (int step = from; step < to; ++step) {
    ParamSet total;
    for (int micro = 0; micro < gas; ++micro) {
      ParamSet sum;
      for (int rank = 0; rank < world; ++rank) {
        ParamSet grads;
        const Batch batch = model.MakeBatch(BatchSeed(seed, rank, step, micro));
        RETURN_IF_ERROR(ForwardBackwardDense(model, params, batch, &grads).status());
        AddOrTake(sum, std::move(grads), rank == 0);
      }
      AddOrTake(total, std::move(sum), micro == 0);
    }
    for (size_t i = 0; i < params.size(); ++i) {
      std::vector<std::span<float>> s;
      for (size_t b = 1; b < states.size(); ++b) s.emplace_back(states[b][i]);
      StepArgs args{.params = params[i],
                    .grads = total[i].data(),
                    .grad_dtype = DType::kF32,
                    .state = s,
                    .step = step + 1,
                    .grad_scale = 1.0f / static_cast<float>(world * gas)};
      RETURN_IF_ERROR(optimizer->Step(args));
    }
  }
  return states;
}

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  static int counter = 0;
  const std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/", name, "-", counter++);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace zero::testing_model
