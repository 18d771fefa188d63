// The terminal table: one line per run, GB with the paper's rounding.
#include <algorithm>
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "footprint/names.h"
#include "footprint/report.h"

namespace zero::footprint {
namespace {

struct Column {
  const char* header;
  bool left;
  std::function<std::string(const Row&)> cell;
};

std::string Percent(double p) {
  if (!std::isfinite(p)) return "inf";
  return absl::StrFormat("%+.2f", p);
}

double Peak(const Row& r) { return static_cast<double>(r.measured.peak_allocated); }

// The activation columns: the settings where they differ between rows
// (else the header says them), the tag's peak, a layer's bytes measured
// and by Korthikanti et al.
void ActivationColumns(const std::vector<Row>& rows, std::vector<Column>& c) {
  auto varies = [&](auto field) {
    for (const Row& r : rows) {
      if (field(r) != field(rows.front())) return true;
    }
    return false;
  };
  auto setting = [](const Row& r, auto get) {
    return r.activations.has_value() ? get(*r.activations) : std::string("-");
  };
  const std::pair<const char*, std::function<std::string(const ActivationOptions&)>> settings[] = {
      {"seq", [](const ActivationOptions& a) { return absl::StrCat(a.seq); }},
      {"mb", [](const ActivationOptions& a) { return absl::StrCat(a.micro_batch); }},
      {"kern", [](const ActivationOptions& a) { return std::string(Name(a.kernels)); }},
      {"attn", [](const ActivationOptions& a) { return std::string(Name(a.attention)); }},
      {"ckpt", [](const ActivationOptions& a) { return std::string(Name(a.checkpointing)); }}};
  for (const auto& [header, get] : settings) {
    auto cell = [&setting, get = get](const Row& r) { return setting(r, get); };
    if (varies(cell)) c.push_back({header, true, cell});
  }
  c.push_back({"act", false, [](const Row& r) {
                 return r.activations ? FormatGB(r.measured.activations) : "-";
               }});
  c.push_back({"act/L", false, [](const Row& r) {
                 return r.activations ? FormatGB(r.measured.layer_activations) : "-";
               }});
  c.push_back({"paper/L", false, [](const Row& r) {
                 return r.activations && r.activations->element_bytes == 2
                            ? FormatGB(r.layer_paper)
                            : "-";
               }});
  c.push_back({"d%", false, [](const Row& r) {
                 return r.activations && r.activations->element_bytes == 2
                            ? Percent(Row::DiffPercent(r.measured.layer_activations, r.layer_paper))
                            : "-";
               }});
}

bool AnyNvme(const std::vector<Row>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.paper.nvme > 0; });
}

std::vector<Column> Columns(const std::vector<Row>& rows) {
  const bool offload = std::any_of(rows.begin(), rows.end(),
                                   [](const Row& r) { return r.offload != Offload::kNone; });
  const bool activations =
      std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.activations; });
  std::vector<Column> c = {
      {"model", true, [](const Row& r) { return r.model; }},
      {"N", false, [](const Row& r) { return absl::StrCat(r.ranks); }},
      {"stage", false, [](const Row& r) { return absl::StrCat(r.stage); }},
      {"prec", true, [](const Row& r) { return std::string(Name(r.precision)); }},
      {"optim", true, [](const Row& r) { return std::string(Name(r.optimizer)); }},
      {"offload", true, [](const Row& r) { return std::string(Name(r.offload)); }},
      {"params", false, [](const Row& r) { return FormatGB(r.measured.params); }},
      {"grads", false, [](const Row& r) { return FormatGB(r.measured.grads); }},
      {"optim", false, [](const Row& r) { return FormatGB(r.measured.optimizer); }},
      {"comm", false, [](const Row& r) { return FormatGB(r.measured.comm); }},
      {"gathered", false, [](const Row& r) { return FormatGB(r.measured.gathered); }},
      {"host", false, [](const Row& r) { return FormatGB(r.measured.peak_host); }},
      {"padding", false, [](const Row& r) { return FormatGB(r.padding); }},
      {"peak", false, [](const Row& r) { return FormatGB(Peak(r)); }},
      {"fits", true, [](const Row& r) { return std::string(r.fits() ? "yes" : "NO"); }},
      {"states", false, [](const Row& r) { return FormatGB(r.states()); }},
      {"paper", false, [](const Row& r) { return FormatGB(r.paper.device()); }},
      {"d%", false,
       [](const Row& r) { return Percent(Row::DiffPercent(r.states(), r.paper.device())); }},
      {"DS gpu", false,
       [](const Row& r) { return r.deepspeed.available ? FormatGB(r.deepspeed.gpu) : "-"; }},
      {"d%", false, [](const Row& r) {
         return r.deepspeed.available ? Percent(Row::DiffPercent(Peak(r), r.deepspeed.gpu)) : "-";
       }}};
  if (activations) ActivationColumns(rows, c);
  if (offload) {
    c.push_back({"p.host", false, [](const Row& r) { return FormatGB(r.paper.host); }});
    c.push_back({"DS cpu", false, [](const Row& r) {
                   return r.deepspeed.available ? FormatGB(r.deepspeed.cpu_rank) : "-";
                 }});
  }
  if (AnyNvme(rows)) {
    c.push_back({"nvme", false, [](const Row& r) { return FormatGB(r.measured.nvme); }});
    c.push_back({"p.nvme", false, [](const Row& r) { return FormatGB(r.paper.nvme); }});
    c.push_back({"DS nvme", false, [](const Row& r) {
                   return r.deepspeed.available ? FormatGB(r.deepspeed.nvme_rank) : "-";
                 }});
  }
  c.push_back({"sent/step", false, [](const Row& r) {
                 return FormatGB(static_cast<double>(r.measured.sent_per_step.bytes_sent));
               }});
  c.push_back({"xPsi", false, [](const Row& r) {
                 return r.psi == 0
                            ? std::string("-")
                            : absl::StrFormat("%.3f", r.measured.sent_per_step.elements_sent /
                                                          static_cast<double>(r.psi));
               }});
  return c;
}

std::string Render(const std::vector<Column>& columns, const std::vector<Row>& rows) {
  std::vector<std::string> headers;
  std::vector<bool> left;
  for (const Column& c : columns) {
    headers.push_back(c.header);
    left.push_back(c.left);
  }
  std::vector<std::vector<std::string>> cells;
  for (const Row& r : rows) {
    cells.emplace_back();
    for (const Column& c : columns) cells.back().push_back(c.cell(r));
  }
  return RenderTable(headers, left, cells);
}

constexpr char kLegend[] =
    "params/grads/optim: peak bytes per pool tag (optim: fp32 master + moments); comm: buckets "
    "and\nstaging in flight; gathered: stage 3's gathered parameters; host: peak pinned host "
    "bytes; padding:\nthe states' bytes that pad units to N*16; peak: the pool's peak of all "
    "tags together; fits: peak\nreserved <= --device_memory; states = params + grads + optim; "
    "paper: the ZeRO paper's formula for\nthem; DS gpu: DeepSpeed's estimator (its d% is peak "
    "against it); sent/step: bytes this rank sends\nin the last step (ring model); xPsi: "
    "elements sent / Psi.\n";
constexpr char kOffloadLegend[] =
    "p.host: the paper's host bytes (ZeRO-Offload); DS cpu: DeepSpeed's host estimate per node "
    "/ GPUs per node.\n";
constexpr char kNvmeLegend[] =
    "nvme: bytes in the rank's NVMe file (master + moments); p.nvme: that formula; DS nvme: "
    "ZeRO-Infinity's\noptimizer states on NVMe (fp32 master, moments and fp32 gradients, 16 "
    "bytes a parameter with Adam) / N.\n";

constexpr char kActivationLegend[] =
    "act: peak of the activations tag (one micro-batch); act/L: what a layer keeps from its "
    "forward\nto its backward, measured on the pool; paper/L: Korthikanti et al. 2022 for it "
    "(16-bit; sdpa\nand flash attention: the selective figure); d%: act/L against it.\n";

// "Activations of one micro-batch: seq 4096, micro-batch 1, transformers
// kernels, sdpa attention, no checkpointing." with the settings every row
// shares (the columns show the others).
std::string ActivationHeader(const std::vector<Row>& rows) {
  std::vector<const ActivationOptions*> all;
  for (const Row& r : rows) {
    if (r.activations) all.push_back(&*r.activations);
  }
  auto shared = [&](auto get) {
    for (const ActivationOptions* a : all) {
      if (get(*a) != get(*all.front())) return false;
    }
    return true;
  };
  const ActivationOptions& a = *all.front();
  std::vector<std::string> parts;
  if (shared([](const auto& o) { return o.seq; })) parts.push_back(absl::StrCat("seq ", a.seq));
  if (shared([](const auto& o) { return o.micro_batch; })) {
    parts.push_back(absl::StrCat("micro-batch ", a.micro_batch));
  }
  if (shared([](const auto& o) { return o.kernels; })) {
    parts.push_back(absl::StrCat(std::string(Name(a.kernels)), " kernels",
                                 a.backend == Backend::kCpu ? " on the CPU" : ""));
  }
  if (shared([](const auto& o) { return o.attention; })) {
    parts.push_back(absl::StrCat(std::string(Name(a.attention)), " attention"));
  }
  if (shared([](const auto& o) { return o.checkpointing; })) {
    parts.push_back(a.checkpointing == Checkpointing::kNone
                        ? std::string("no checkpointing")
                        : absl::StrCat(std::string(Name(a.checkpointing)), " checkpointing"));
  }
  return absl::StrCat("Activations of one micro-batch", parts.empty() ? "" : ": ",
                      absl::StrJoin(parts, ", "), ".\n");
}

}  // namespace

std::string RenderTable(const std::vector<std::string>& headers, const std::vector<bool>& left,
                        const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::vector<std::string>> cells = {headers};
  cells.insert(cells.end(), rows.begin(), rows.end());
  std::vector<size_t> width(headers.size(), 0);
  for (const auto& line : cells) {
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  }
  std::string out;
  for (const auto& line : cells) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      const int w = static_cast<int>(width[c]);
      absl::StrAppend(&text, c == 0 ? "" : "  ",
                      left[c] ? absl::StrFormat("%-*s", w, line[c])
                              : absl::StrFormat("%*s", w, line[c]));
    }
    text.erase(text.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, text, "\n");
  }
  return out;
}

std::string FormatGB(double bytes) {
  const double gb = bytes / 1e9;
  if (gb == 0) return "0";
  if (gb >= 99.95) return absl::StrFormat("%.0f", gb);
  if (gb >= 9.995) return absl::StrFormat("%.1f", gb);
  if (gb >= 0.9995) return absl::StrFormat("%.2f", gb);
  return absl::StrFormat("%.3g", gb);
}

std::string FormatTable(const std::vector<Row>& rows, int steps) {
  const bool offload = std::any_of(rows.begin(), rows.end(),
                                   [](const Row& r) { return r.offload != Offload::kNone; });
  const bool activations =
      std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.activations; });
  std::string out = absl::StrFormat(
      "Per rank, in GB (1e9 bytes), measured by the real engine on rank 0 of N (meta device, "
      "%d step%s).\nEvery rank holds the same bytes: each unit is padded to N*16 elements and "
      "split equally, so rank 0 stands for all.\n",
      steps, steps == 1 ? "" : "s");
  if (activations) absl::StrAppend(&out, ActivationHeader(rows));
  absl::StrAppend(&out, "\n", Render(Columns(rows), rows), "\n", kLegend,
                  activations ? kActivationLegend : "", offload ? kOffloadLegend : "",
                  AnyNvme(rows) ? kNvmeLegend : "");
  return out;
}

}  // namespace zero::footprint
