#include "footprint/planner.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "footprint/names.h"
#include "footprint/report.h"

namespace zero::footprint {
namespace {

absl::Status Chosen(const char* option) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "--plan chooses --%s itself (ranks: --cards x --nodes); leave --%s out", option, option));
}

std::string Percent(double fraction) { return absl::StrFormat("%.1f%%", 100 * fraction); }

}  // namespace

absl::StatusOr<Options> PlanSweep(Options o) {
  for (const char* option : {"ranks", "stage", "offload", "checkpointing"}) {
    if (o.given.count(option) > 0) return Chosen(option);
  }
  // The plan's table has no column for these: rows of two values would be
  // told apart by nothing (and the header names only the first).
  for (const auto& [option, count] :
       {std::pair<const char*, size_t>{"model", o.models.size()}, {"seq", o.seqs.size()},
        {"precision", o.precisions.size()}, {"optimizer", o.optimizers.size()},
        {"kernels", o.kernels.size()}, {"attention", o.attentions.size()}}) {
    if (count != 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--plan: give one --%s, not %d (plan each separately)", option, count));
    }
  }
  if (static_cast<int64_t>(o.cards) * o.nodes > (1 << 24)) {
    return absl::InvalidArgumentError("--plan: --cards x --nodes is over 16777216 ranks");
  }
  o.ranks = {o.cards * o.nodes};
  o.stages = {0, 1, 2, 3};
  o.offloads = {Offload::kNone, Offload::kOptimizer, Offload::kParameters};
  o.checkpointings = {Checkpointing::kNone, Checkpointing::kFull};
  // Selective recomputation is Megatron's, for eager attention's softmax;
  // transformers' gradient checkpointing recomputes whole layers.
  if (o.attentions[0] == Attention::kEager && o.kernels[0] == Kernels::kFused) {
    o.checkpointings.insert(o.checkpointings.begin() + 1, Checkpointing::kSelective);
  }
  if (o.given.count("micro_batch") == 0) o.micro_batches = {1, 2, 4, 8};
  o.knobs.gpus_per_node = o.cards;
  return o;
}

std::vector<PlanLine> RankPlan(const std::vector<Row>& rows, const Options& o) {
  std::vector<PlanLine> lines;
  for (const Row& r : rows) {
    PlanLine line;
    line.row = &r;
    line.host_per_node = static_cast<double>(r.measured.peak_host) * o.cards;
    line.recompute = r.recompute;
    line.fits = r.fits() && line.host_per_node <= static_cast<double>(o.host_memory);
    lines.push_back(line);
  }
  // Over several nodes the slow link sets the pace: bytes across it first
  // (with the topology settings given: --hierarchical, --hpz, --quantized_*).
  auto cost = [](const PlanLine& l) {
    const Row& r = *l.row;
    return std::make_tuple(r.measured.across_per_step, r.measured.sent_per_step.bytes_sent,
                           l.host_per_node, l.recompute,
                           -static_cast<int64_t>(r.activations ? r.activations->micro_batch : 0),
                           r.stage);
  };
  std::stable_sort(lines.begin(), lines.end(), [&](const PlanLine& a, const PlanLine& b) {
    if (a.fits != b.fits) return a.fits;
    if (!a.fits) return a.row->measured.peak_reserved < b.row->measured.peak_reserved;
    return cost(a) < cost(b);
  });
  return lines;
}

std::string FormatPlan(const std::vector<PlanLine>& lines, const Options& o, double seconds) {
  const int fitting =
      static_cast<int>(std::count_if(lines.begin(), lines.end(), [](auto& l) { return l.fits; }));
  const Row& first = *lines.front().row;
  std::string out = absl::StrFormat(
      "Plan for %s on %d node%s x %d cards of %s GB (host %s GB per node): %d of %d "
      "configurations fit (%.1f s).\n",
      first.model, o.nodes, o.nodes == 1 ? "" : "s", o.cards, FormatGB(o.knobs.device_memory),
      FormatGB(o.host_memory), fitting, lines.size(), seconds);
  if (first.activations.has_value()) {
    const ActivationOptions& a = *first.activations;
    absl::StrAppend(&out, absl::StrFormat("Activations: seq %d, %s kernels%s, %s attention, %s.\n",
                                          a.seq, std::string(Name(a.kernels)),
                                          a.backend == Backend::kCpu ? " on the CPU" : "",
                                          std::string(Name(a.attention)),
                                          std::string(Name(first.precision))));
  }
  absl::StrAppend(&out, fitting > 0 ? "Cheapest first (bytes across nodes per step, bytes sent, "
                                      "host memory, recomputation, then larger micro-batches):\n\n"
                                    : "Nothing fits; the closest:\n\n");
  std::vector<std::vector<std::string>> cells;
  for (const PlanLine& l : lines) {
    if (!l.fits && (fitting > 0 || cells.size() >= 5)) break;
    const Row& r = *l.row;
    const ActivationOptions* a = r.activations ? &*r.activations : nullptr;
    cells.push_back(
        {absl::StrCat(cells.size() + 1), absl::StrCat(r.stage), std::string(Name(r.offload)),
         a ? std::string(Name(a->checkpointing)) : "-", a ? absl::StrCat(a->micro_batch) : "-",
         FormatGB(static_cast<double>(r.measured.peak_reserved)),
         a ? FormatGB(r.measured.activations) : "-", FormatGB(l.host_per_node),
         FormatGB(static_cast<double>(r.measured.sent_per_step.bytes_sent)),
         FormatGB(static_cast<double>(r.measured.across_per_step)), Percent(l.recompute),
         l.fits ? "yes" : "NO"});
  }
  absl::StrAppend(
      &out,
      RenderTable({"#", "stage", "offload", "ckpt", "mb", "peak", "act", "host/node", "sent/step",
                   "across/step", "recompute", "fits"},
                  {false, false, true, true, false, false, false, false, false, false, false, true},
                  cells),
      "\npeak: the card's peak (reserved), GB; act: of it, activations at their peak; host/node: "
      "pinned host\nmemory of the node's ranks; sent/step: bytes each rank sends per step; "
      "across/step: of those, bytes\nacross nodes (the mean per rank; "
      "--hierarchical, --hpz, --quantized_* change it); recompute: FLOPs that\ncheckpointing "
      "adds to a step.\n");
  return out;
}

}  // namespace zero::footprint
