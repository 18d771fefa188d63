#include "footprint/cli.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "base/atomic_file.h"
#include "footprint/experiment.h"
#include "footprint/model_json.h"
#include "footprint/options.h"
#include "footprint/planner.h"
#include "footprint/presets.h"
#include "footprint/progress.h"
#include "footprint/report.h"
#include "footprint/row.h"
#include "footprint/timeline_svg.h"
#include "zero/config.h"

namespace zero::footprint {
namespace {

constexpr int kBadInput = 2, kCannotWrite = 1;

// One line, whatever the message holds.
int Fail(std::ostream& err, int code, const std::string& message) {
  err << "footprint: " << absl::StrReplaceAll(message, {{"\n", "; "}}) << "\n";
  return code;
}

absl::StatusOr<ModelSpec> LoadModel(const std::string& name) {
  if (absl::EndsWith(name, ".json")) return LoadModelFile(name);
  std::optional<ModelSpec> preset = Preset(name);
  if (!preset.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--model: unknown preset '%s' (presets: %s; or a file ending in .json)",
                        name, absl::StrJoin(PresetNames(), ", ")));
  }
  if (absl::Status s = Validate(*preset); !s.ok()) {
    return absl::InternalError(absl::StrCat("preset ", name, ": ", s.message()));
  }
  return *std::move(preset);
}

// The activation settings of a sweep, seq 0 as nullopt (none).
std::vector<std::optional<ActivationOptions>> ActivationSweep(const Options& o) {
  std::vector<std::optional<ActivationOptions>> sweep;
  for (uint64_t seq : o.seqs) {
    if (seq == 0) {
      sweep.push_back(std::nullopt);
      continue;
    }
    for (uint64_t micro_batch : o.micro_batches) {
      for (Kernels kernels : o.kernels) {
        for (Attention attention : o.attentions) {
          for (Checkpointing checkpointing : o.checkpointings) {
            sweep.push_back(ActivationOptions{.seq = seq,
                                              .micro_batch = micro_batch,
                                              .attention = attention,
                                              .checkpointing = checkpointing,
                                              .kernels = kernels,
                                              .backend = o.backend});
          }
        }
      }
    }
  }
  return sweep;
}

std::vector<Experiment> Sweep(const Options& o, const std::vector<ModelSpec>& models) {
  std::vector<Experiment> runs;
  for (const ModelSpec& model : models) {
    for (int ranks : o.ranks) {
      for (Precision precision : o.precisions) {
        for (OptimizerKind optimizer : o.optimizers) {
          for (Offload offload : o.offloads) {
            for (const std::optional<ActivationOptions>& activations : ActivationSweep(o)) {
              for (int stage : o.stages) {
                runs.push_back(
                    {&model, ranks, stage, precision, optimizer, offload, activations});
              }
            }
          }
        }
      }
    }
  }
  return runs;
}

std::string LabelOf(const Experiment& e) {
  Row row;
  row.model = e.model->name;
  row.ranks = e.ranks;
  row.stage = e.stage;
  row.precision = e.precision;
  row.optimizer = e.optimizer;
  row.offload = e.offload;
  row.activations = e.ActivationsFor();
  return row.Label();
}

// A model with learned positions cannot run sequences longer than them;
// one without a transformer shape has no activations (said on `err`).
absl::Status CheckActivations(const Options& o, const std::vector<ModelSpec>& models,
                              std::ostream& err) {
  const uint64_t longest = *std::max_element(o.seqs.begin(), o.seqs.end());
  for (const ModelSpec& model : models) {
    if (!model.transformer.has_value() || model.sites.empty()) {
      if (longest > 0) {
        err << "footprint: " << model.name
            << " is a list of modules without a transformer shape: no activations\n";
      }
      continue;
    }
    const uint64_t positions = model.transformer->positions;
    if (positions > 0 && longest > positions) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--seq: %d is longer than %s's %d learned positions", longest, model.name, positions));
    }
  }
  return absl::OkStatus();
}

// "gpt2-xl N=8 stage 0 bf16 adam offload=optimizer: INVALID_ARGUMENT: ...".
absl::Status RunError(const std::string& label, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrFormat("%s: %s: %s", label,
                                                absl::StatusCodeToString(s.code()), s.message()));
}

// A sweep crosses every list, so it may pair options that cannot go
// together (offload at stage 0, say): such runs are left out, each reason
// said once on `err`. A single run, or a sweep with nothing left, is an
// error.
absl::StatusOr<std::vector<Experiment>> DropImpossible(std::vector<Experiment> runs,
                                                       const Knobs& knobs, std::ostream* notes) {
  std::vector<Experiment> kept;
  std::vector<std::pair<std::string, int>> reasons;  // message, runs left out
  absl::Status first;
  for (const Experiment& e : runs) {
    absl::Status s = ValidateConfig(MakeEngineConfig(e, knobs));
    if (const auto a = e.ActivationsFor(); s.ok() && a.has_value()) {
      s = ValidateActivationOptions(*a);
    }
    if (s.ok()) {
      kept.push_back(e);
      continue;
    }
    if (first.ok()) first = RunError(LabelOf(e), s);
    auto it = std::find_if(reasons.begin(), reasons.end(),
                           [&](const auto& r) { return r.first == s.message(); });
    if (it == reasons.end())
      reasons.emplace_back(std::string(s.message()), 1);
    else
      ++it->second;
  }
  if (runs.size() == 1 || kept.empty()) {
    if (!first.ok()) return first;
  }
  for (const auto& [reason, count] : reasons) {
    if (notes == nullptr) break;
    *notes << absl::StrFormat("footprint: left out %d run%s of the sweep: %s\n", count,
                           count == 1 ? "" : "s", reason);
  }
  return kept;
}

// The rows, or the exit status of the first run that failed.
// With `timeline`, `runs` is one run, whose last step goes there.
absl::StatusOr<std::vector<Row>> RunAll(const std::vector<Experiment>& runs, const Knobs& knobs,
                                        std::ostream& err, bool tty, StepTimeline* timeline) {
  Progress progress(err, tty, static_cast<int>(runs.size()));
  std::vector<Row> rows;
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string label = LabelOf(runs[i]);
    progress.Begin(static_cast<int>(i), label);
    absl::StatusOr<Measurement> m = RunExperiment(runs[i], knobs, timeline);
    if (!m.ok()) {
      progress.Finish();
      return RunError(label, m.status());
    }
    rows.push_back(MakeRow(runs[i], *m, knobs));
  }
  return rows;
}

absl::Status WriteOutputs(const Options& o, const std::vector<Row>& rows,
                          const StepTimeline& timeline, std::ostream& out) {
  const std::pair<const std::string*, std::string> files[] = {
      {&o.json_path, o.json_path.empty() ? "" : ToJson(rows, o.knobs.steps)},
      {&o.csv_path, o.csv_path.empty() ? "" : ToCsv(rows)},
      {&o.svg_path, o.svg_path.empty() ? "" : ToSvg(rows)},
      {&o.timeline_path, o.timeline_path.empty() ? "" : TimelineSvg(timeline, rows[0].Label())}};
  for (const auto& [path, contents] : files) {
    if (path->empty()) continue;
    if (absl::Status s = WriteFileAtomically(*path, contents); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("cannot write ", *path, ": ", s.message()));
    }
    out << "wrote " << *path << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

int RunFootprint(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                 bool err_is_tty) {
  absl::StatusOr<Options> options = ParseOptions(args);
  if (!options.ok()) return Fail(err, kBadInput, std::string(options.status().message()));
  if (options->help != Options::Help::kNone) {
    out << Usage(options->help, options->help_match);
    return 0;
  }
  if (options->plan) options = PlanSweep(*std::move(options));
  if (!options.ok()) return Fail(err, kBadInput, std::string(options.status().message()));
  std::vector<ModelSpec> models;
  for (const std::string& name : options->models) {
    absl::StatusOr<ModelSpec> model = LoadModel(name);
    if (!model.ok()) return Fail(err, kBadInput, std::string(model.status().message()));
    models.push_back(*std::move(model));
  }
  if (absl::Status s = CheckActivations(*options, models, err); !s.ok()) {
    return Fail(err, kBadInput, std::string(s.message()));
  }
  // The planner's sweep pairs every stage with every offload on purpose.
  absl::StatusOr<std::vector<Experiment>> runs = DropImpossible(
      Sweep(*options, models), options->knobs, options->plan ? nullptr : &err);
  if (!runs.ok()) return Fail(err, kBadInput, std::string(runs.status().message()));
  StepTimeline timeline;
  const bool draw = !options->timeline_path.empty();
  if (draw && runs->size() != 1) {
    return Fail(err, kBadInput,
                absl::StrFormat("--timeline: draws one run, and the options make %d (give one "
                                "value to each list)",
                                runs->size()));
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<Row>> rows =
      RunAll(*runs, options->knobs, err, err_is_tty, draw ? &timeline : nullptr);
  if (!rows.ok()) return Fail(err, kBadInput, std::string(rows.status().message()));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out << (options->plan ? FormatPlan(RankPlan(*rows, *options), *options, seconds)
                        : FormatTable(*rows, options->knobs.steps));
  if (absl::Status s = WriteOutputs(*options, *rows, timeline, out); !s.ok()) {
    return Fail(err, kCannotWrite, std::string(s.message()));
  }
  return 0;
}

}  // namespace zero::footprint
