#include "tests/zero/training.h"

#include <cmath>
#include <thread>

#include "base/status_macros.h"
#include "zero/comm/local_communicator.h"
#include "zero/precision.h"

namespace zero::testing_model {

uint64_t BatchSeed(uint64_t seed, int rank, int step, int micro) {
  return MixSeed(MixSeed(MixSeed(seed, rank), step), micro);
}

std::vector<ParamSpec> SpecsOf(const Model& model) {
  std::vector<ParamSpec> specs;
  for (const ParamInfo& p : model.params()) specs.push_back({p.name, p.numel, p.module});
  return specs;
}

namespace {

// The values of parameter view `view` as fp32 in host memory: copied on the
// engine's stream (the memory may be a card's), then widened.
absl::Status CopyOut(Engine& engine, const Engine::ParamView& view, std::vector<char>& staged,
                     std::vector<float>& out) {
  staged.resize(view.numel * SizeOf(view.dtype));
  RETURN_IF_ERROR(engine.stream()->Copy(staged.data(), view.data, staged.size()));
  RETURN_IF_ERROR(engine.stream()->Synchronize());
  out.resize(view.numel);
  Widen(staged.data(), view.dtype, out.data(), view.numel);
  return absl::OkStatus();
}

// Reads parameters as fp32 whatever the model dtype and wherever they live,
// into a copy that lives until the parameter is read again.
class WideReader {
 public:
  WideReader(Engine& engine, size_t params) : engine_(engine), copies_(params) {}
  std::span<const float> operator()(int id) {
    absl::StatusOr<Engine::ParamView> view = engine_.param_view(id);
    if (!view.ok() || !CopyOut(engine_, *view, staged_, copies_[id]).ok()) return {};
    return copies_[id];
  }

 private:
  Engine& engine_;
  ParamSet copies_;
  std::vector<char> staged_;
};

}  // namespace

absl::Status TrainSteps(const Model& model, const TrainingRun& run, Engine& engine, int rank,
                        int first_step, std::vector<float>& losses) {
  const int gas = run.config.gradient_accumulation_steps;
  const DType dtype = run.config.param_dtype;
  WideReader wide(engine, model.params().size());
  ParamReader reader = [&wide](int id) { return wide(id); };
  Hooks hooks;
  auto fetch = [&engine](int module) { return engine.Fetch(module); };
  auto release = [&engine](int module) { return engine.Release(module); };
  hooks.pre_forward = hooks.pre_backward = fetch;
  hooks.post_forward = hooks.post_backward = release;
  int step = first_step;
  std::vector<float> scaled;
  std::vector<char> narrow;
  // As a bf16/fp16 model would: gradients of the scaled loss, in its dtype.
  hooks.on_grad = [&](int id, std::span<const float> grad) {
    scaled.assign(grad.begin(), grad.end());
    if (run.edit_grad) run.edit_grad(rank, step, id, scaled);
    const float scale = static_cast<float>(engine.loss_scale());
    for (float& g : scaled) g *= scale;
    narrow.resize(scaled.size() * SizeOf(dtype));
    Narrow(scaled.data(), narrow.data(), dtype, scaled.size());
    return engine.AddGrad(id, narrow.data(), scaled.size(), dtype);
  };
  for (; step < run.steps; ++step) {
    double loss = 0;
    for (int micro = 0; micro < gas; ++micro) {
      const Batch batch = model.MakeBatch(BatchSeed(run.seed, rank, step, micro));
      ASSIGN_OR_RETURN(float l, model.ForwardBackward(reader, batch, hooks));
      loss += l;
    }
    losses.push_back(static_cast<float>(loss / gas));
    RETURN_IF_ERROR(engine.Step());
  }
  return absl::OkStatus();
}

absl::Status SetInitialParams(const Model& model, uint64_t seed, Engine& engine) {
  ASSIGN_OR_RETURN(ParamSet initial, InitialParams(model, seed));
  for (int id = 0; id < static_cast<int>(initial.size()); ++id) {
    RETURN_IF_ERROR(engine.SetParam(id, initial[id]));
  }
  return absl::OkStatus();
}

absl::StatusOr<ParamSet> ReadParams(const Model& model, Engine& engine) {
  ParamSet params(model.params().size());
  std::vector<char> staged;
  for (int m = 0; m < static_cast<int>(model.modules().size()); ++m) {
    RETURN_IF_ERROR(engine.Fetch(m));
    for (int id = 0; id < static_cast<int>(params.size()); ++id) {
      if (model.params()[id].module != m) continue;
      ASSIGN_OR_RETURN(Engine::ParamView view, engine.param_view(id));
      RETURN_IF_ERROR(CopyOut(engine, view, staged, params[id]));
    }
    RETURN_IF_ERROR(engine.Release(m));
  }
  return params;
}

namespace {

void RunRank(const Model& model, const TrainingRun& run, Optimizer* optimizer,
             Communicator* comm, DeviceSystem* devices, int rank, RankResult& out) {
  auto fail = [&](absl::Status s) { out.status = s; };
  // Ranks share the devices round-robin when there are fewer (one card).
  const int device = rank % devices->device_count();
  EngineConfig config = run.config;
  if (run.config_for_rank) run.config_for_rank(rank, config);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(config, SpecsOf(model), optimizer, comm, devices, device);
  if (!engine.ok()) return fail(engine.status());
  const bool has_bytes = devices->backend().has_bytes();
  if (has_bytes) {
    if (absl::Status s = SetInitialParams(model, run.seed, **engine); !s.ok()) return fail(s);
  }
  if (run.before_training) {
    if (absl::Status s = run.before_training(rank, **engine); !s.ok()) return fail(s);
  }
  devices->pool(device).ResetPeaks();
  out.status = TrainSteps(model, run, **engine, rank, /*first_step=*/0, out.losses);
  out.stats = (*engine)->stats();
  out.peak_gradients = out.stats.pool.tag(Tag::kGradients).peak;
  out.peak_communication = out.stats.pool.tag(Tag::kCommunication).peak;
  if (!has_bytes || !out.status.ok()) return;
  absl::StatusOr<ParamSet> final_params = ReadParams(model, **engine);
  if (!final_params.ok()) return fail(final_params.status());
  out.params = *std::move(final_params);
}

}  // namespace

void AddOrTake(ParamSet& into, ParamSet from, bool first) {
  if (first) {
    into = std::move(from);
    return;
  }
  for (size_t i = 0; i < into.size(); ++i) {
    for (size_t j = 0; j < into[i].size(); ++j) into[i][j] += from[i][j];
  }
}

std::vector<RankResult> TrainWithEngine(const Model& model, const TrainingRun& run,
                                        const OptimizerFactory& make_optimizer) {
  std::vector<RankResult> results(run.world);
  auto fail_all = [&](const absl::Status& s) {
    for (RankResult& r : results) r.status = s;
    return results;
  };
  const DeviceSpec spec{run.kind, run.devices > 0 ? run.devices : run.world, run.capacity};
  absl::StatusOr<std::unique_ptr<DeviceSystem>> devices =
      run.host_streams.delayed() ? DeviceSystem::CreateWithHostStreams(spec, run.host_streams)
                                 : DeviceSystem::Create(spec);
  if (!devices.ok()) return fail_all(devices.status());
  LocalGroup::Options options;
  options.timeout = absl::Seconds(20);
  options.has_bytes = (*devices)->backend().has_bytes();
  options.stream_ordered = run.stream_ordered;
  options.devices = devices->get();
  options.move_on_streams = run.move_on_streams;
  options.ranks_per_node = run.ranks_per_node;
  options.hierarchical = run.hierarchical;
  auto comms = LocalGroup::Create(run.world, options);
  if (!comms.ok()) return fail_all(comms.status());
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = make_optimizer();
  if (!optimizer.ok()) return fail_all(optimizer.status());
  std::vector<std::thread> threads;
  for (int r = 0; r < run.world; ++r) {
    threads.emplace_back([&, r] {
      RunRank(model, run, optimizer->get(), (*comms)[r].get(), devices->get(), r, results[r]);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

absl::StatusOr<ParamSet> TrainReference(const Model& model, const TrainingRun& run,
                                        const OptimizerFactory& make_optimizer) {
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, make_optimizer());
  ASSIGN_OR_RETURN(ParamSet params, InitialParams(model, run.seed));
  const int gas = run.config.gradient_accumulation_steps;
  const int per_node =
      run.ranks_per_node > 0 && run.hierarchical ? run.ranks_per_node : run.world;
  const size_t n = params.size();
  std::vector<ParamSet> state(optimizer->state_buffers());
  for (ParamSet& s : state) {
    for (const auto& p : params) s.emplace_back(p.size(), 0.0f);
  }
  for (int step = 0; step < run.steps; ++step) {
    float grad_scale = 1.0f / static_cast<float>(run.world * gas);
    ParamSet total;
    for (int micro = 0; micro < gas; ++micro) {
      // The communicator's order: each node's ranks, then the nodes' sums.
      ParamSet sum;
      for (int node = 0; node < run.world / per_node; ++node) {
        ParamSet node_sum;
        for (int local = 0; local < per_node; ++local) {
          ParamSet grads;
          const int rank = node * per_node + local;
          const Batch batch = model.MakeBatch(BatchSeed(run.seed, rank, step, micro));
          RETURN_IF_ERROR(ForwardBackwardDense(model, params, batch, &grads).status());
          AddOrTake(node_sum, std::move(grads), local == 0);
        }
        AddOrTake(sum, std::move(node_sum), node == 0);
      }
      AddOrTake(total, std::move(sum), micro == 0);
    }
    if (run.config.max_grad_norm > 0) {
      // Summed in parameter order, not the engine's piece order: equal up
      // to rounding, not bit for bit.
      double squares = 0;
      for (const auto& g : total) for (float x : g) squares += double(x) * double(x);
      const double coef = run.config.max_grad_norm / (std::sqrt(squares) * grad_scale + 1e-6);
      if (coef < 1.0) grad_scale = static_cast<float>(grad_scale * coef);
    }
    for (size_t i = 0; i < n; ++i) {
      std::vector<std::span<float>> s;
      for (ParamSet& buffer : state) s.emplace_back(buffer[i]);
      StepArgs args{.params = params[i], .grads = total[i].data(), .grad_dtype = DType::kF32,
                    .state = s, .step = step + 1, .grad_scale = grad_scale};
      RETURN_IF_ERROR(optimizer->Step(args));
    }
  }
  return params;
}

}  // namespace zero::testing_model
