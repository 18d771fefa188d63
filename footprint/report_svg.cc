// An SVG chart: one stacked bar per run (the peaks of params, grads,
// optimizer state, communication buffers, gathered parameters, activations,
// pinned host), a GB axis, the card's size as a dashed line when it is in
// range, a legend; opens in any browser.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "footprint/names.h"
#include "footprint/report.h"
#include "footprint/svg.h"

namespace zero::footprint {
namespace {

struct Part {
  const char* name;
  const char* color;
  double (*bytes)(const Row&);
};

const Part kParts[] = {
    {"parameters", TagColor(Tag::kParameters), [](const Row& r) { return double(r.measured.params); }},
    {"gradients", TagColor(Tag::kGradients), [](const Row& r) { return double(r.measured.grads); }},
    {"optimizer state", TagColor(Tag::kOptimizerState),
     [](const Row& r) { return double(r.measured.optimizer); }},
    {"communication", TagColor(Tag::kCommunication),
     [](const Row& r) { return double(r.measured.comm); }},
    {"gathered", TagColor(Tag::kGathered), [](const Row& r) { return double(r.measured.gathered); }},
    {"activations", TagColor(Tag::kActivations),
     [](const Row& r) { return double(r.measured.activations); }},
    {"pinned host", "#59a14f", [](const Row& r) { return double(r.measured.peak_host); }},
};

constexpr double kLeft = 80, kTop = 76, kPlotHeight = 360, kBar = 28, kGap = 14;
// Pixels per character of the 11px labels (a generous average).
constexpr double kCharWidth = 6.6;

double Total(const Row& r) {
  double t = 0;
  for (const Part& p : kParts) t += p.bytes(r);
  return t;
}

std::string Bar(const Row& r, double x, double top_gb) {
  std::string out;
  double y = kTop + kPlotHeight;
  for (const Part& p : kParts) {
    const double h = kPlotHeight * p.bytes(r) / 1e9 / top_gb;
    if (h <= 0) continue;
    y -= h;
    absl::StrAppendFormat(&out,
                          "<rect x=\"%.1f\" y=\"%.2f\" width=\"%.0f\" height=\"%.2f\" "
                          "fill=\"%s\"><title>%s: %s GB</title></rect>\n",
                          x, y, kBar, h, p.color, p.name, FormatGB(p.bytes(r)));
  }
  absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                        x + kBar / 2, y - 4, FormatGB(Total(r)));
  const double base = kTop + kPlotHeight + 8;
  absl::StrAppendFormat(&out,
                        "<text transform=\"translate(%.1f %.1f) rotate(-90)\" "
                        "text-anchor=\"end\">%s</text>\n",
                        x + kBar / 2 + 4, base, XmlEscape(r.Label()));
  return out;
}

std::string Legend(double x) {
  std::string out;
  const double y = 48;
  for (const Part& p : kParts) {
    absl::StrAppendFormat(&out,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                          x, y - 10, p.color, x + 16, y, p.name);
    x += 16 + kCharWidth * std::string(p.name).size() + 18;
  }
  return out;
}

}  // namespace

std::string ToSvg(const std::vector<Row>& rows) {
  double top = 0;
  for (const Row& r : rows) top = std::max(top, Total(r));
  const double device = rows.empty() ? 0 : static_cast<double>(rows[0].device_memory);
  const bool show_device = device > 0 && device <= 1.5 * std::max(top, 1.0);
  double top_gb = std::max(show_device ? std::max(top, device) : top, 1e6) / 1e9 * 1.08;
  top_gb = TickStep(top_gb) * std::ceil(top_gb / TickStep(top_gb));
  const double width = std::max(760.0, kLeft + 20 + rows.size() * (kBar + kGap) + kGap);
  size_t longest = 0;
  for (const Row& r : rows) longest = std::max(longest, r.Label().size());
  const double height = kTop + kPlotHeight + 20 + kCharWidth * longest;
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n<text x=\"%.1f\" y=\"22\" font-size=\"14\" font-weight=\"bold\">"
      "Memory per rank, measured (rank 0 of N; every rank holds the same)</text>\n",
      width, height, kLeft);
  absl::StrAppend(&out, Legend(kLeft),
                  GbAxis({kLeft, kTop, width - 20, kPlotHeight}, top_gb, "GB per rank (1e9 bytes)"));
  for (size_t i = 0; i < rows.size(); ++i) {
    absl::StrAppend(&out, Bar(rows[i], kLeft + kGap + i * (kBar + kGap), top_gb));
  }
  if (show_device) {
    const double y = kTop + kPlotHeight * (1 - device / 1e9 / top_gb);
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\" "
                          "stroke-dasharray=\"6 4\"/><text x=\"%.1f\" y=\"%.1f\" "
                          "text-anchor=\"end\">card: %s GB</text>\n",
                          kLeft, y, width - 20, y, width - 20, y - 4, FormatGB(device));
  }
  absl::StrAppendFormat(&out,
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n",
                        kLeft, kTop + kPlotHeight, width - 20, kTop + kPlotHeight);
  return out + "</svg>\n";
}

}  // namespace zero::footprint
