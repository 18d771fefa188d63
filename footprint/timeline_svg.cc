#include "footprint/timeline_svg.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "footprint/report.h"
#include "footprint/svg.h"

namespace zero::footprint {
namespace {

constexpr double kLeft = 80, kTop = 70, kWidth = 960, kHeight = 380;
constexpr size_t kColumns = 960;  // at most one sample per pixel column
// Bottom to top.
constexpr Tag kStack[] = {Tag::kParameters,    Tag::kGradients, Tag::kOptimizerState,
                          Tag::kCommunication, Tag::kGathered,  Tag::kActivations,
                          Tag::kOther};

size_t Total(const std::array<size_t, kNumTags>& bytes) {
  size_t total = 0;
  for (size_t b : bytes) total += b;
  return total;
}

// Per pixel column, the sample with the most bytes, so no peak is lost.
std::vector<size_t> Columns(const TagSeries& series) {
  std::vector<size_t> picked;
  const size_t n = series.bytes.size();
  for (size_t c = 0; c < std::min(n, kColumns); ++c) {
    const size_t begin = c * n / std::min(n, kColumns), end = (c + 1) * n / std::min(n, kColumns);
    size_t best = begin;
    for (size_t i = begin; i < end; ++i) {
      if (Total(series.bytes[i]) > Total(series.bytes[best])) best = i;
    }
    picked.push_back(best);
  }
  return picked;
}

struct Scale {
  size_t samples;
  double top_gb;
  double X(size_t sample) const {
    return kLeft + kWidth * (samples <= 1 ? 0 : double(sample) / double(samples - 1));
  }
  double Y(double bytes) const { return kTop + kHeight * (1 - bytes / 1e9 / top_gb); }
};

// One polygon per tag: its top edge left to right, the one below back.
std::string Areas(const TagSeries& s, const std::vector<size_t>& columns, const Scale& scale) {
  std::string out;
  std::vector<double> below(columns.size(), 0);
  for (Tag tag : kStack) {
    std::vector<double> above = below;
    bool any = false;
    for (size_t c = 0; c < columns.size(); ++c) {
      const size_t b = s.bytes[columns[c]][static_cast<int>(tag)];
      above[c] += static_cast<double>(b);
      any = any || b > 0;
    }
    if (any) {
      std::string points;
      for (size_t c = 0; c < columns.size(); ++c) {
        absl::StrAppendFormat(&points, "%.1f,%.1f ", scale.X(columns[c]), scale.Y(above[c]));
      }
      for (size_t c = columns.size(); c-- > 0;) {
        absl::StrAppendFormat(&points, "%.1f,%.1f ", scale.X(columns[c]), scale.Y(below[c]));
      }
      points.pop_back();
      absl::StrAppendFormat(&out, "<polygon class=\"area\" fill=\"%s\" points=\"%s\"><title>%s</title></polygon>\n",
                            TagColor(tag), points, std::string(TagName(tag)));
    }
    below = std::move(above);
  }
  return out;
}

// The phases as bands with their names, split where backward and the
// optimizer step begin (in pool events, mapped to samples).
std::string Phases(const TagSeries& s, const StepTimeline& t, const Scale& scale) {
  auto sample_at = [&](size_t event) {
    return static_cast<size_t>(std::lower_bound(s.event.begin(), s.event.end(), event) -
                               s.event.begin());
  };
  const size_t bounds[] = {0, sample_at(t.backward), sample_at(t.optimizer), s.event.size()};
  const char* names[] = {"forward", "backward", "optimizer step"};
  std::string out;
  for (int p = 0; p < 3; ++p) {
    const double x0 = scale.X(bounds[p]), x1 = scale.X(std::max(bounds[p + 1], size_t{1}) - 1);
    if (p > 0) {
      absl::StrAppendFormat(&out,
                            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                            "stroke=\"#555\" stroke-dasharray=\"4 3\"/>\n",
                            x0, kTop - 14, x0, kTop + kHeight);
    }
    if (bounds[p + 1] > bounds[p]) {
      absl::StrAppendFormat(&out,
                            "<text class=\"phase\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                            "fill=\"#555\">%s</text>\n",
                            (x0 + x1) / 2, kTop - 18, names[p]);
    }
  }
  return out;
}

std::string PhaseOf(size_t event, const StepTimeline& t) {
  return event < t.backward ? "forward" : event < t.optimizer ? "backward" : "optimizer step";
}

std::string Peak(const TagSeries& s, const StepTimeline& t, const Scale& scale) {
  size_t peak = 0;
  for (size_t i = 0; i < s.bytes.size(); ++i) {
    if (Total(s.bytes[i]) > Total(s.bytes[peak])) peak = i;
  }
  const double x = scale.X(peak), y = scale.Y(static_cast<double>(Total(s.bytes[peak])));
  std::string parts;
  for (Tag tag : kStack) {
    const size_t b = s.bytes[peak][static_cast<int>(tag)];
    if (b > 0) absl::StrAppend(&parts, parts.empty() ? "" : ", ", std::string(TagName(tag)), " ", FormatGB(b));
  }
  const bool right = x < kLeft + kWidth * 0.6;
  return absl::StrFormat(
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d00\"/>"
      "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#d00\"/>\n"
      "<text id=\"peak\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" fill=\"#d00\" "
      "font-weight=\"bold\">peak %s GB (%s)</text>\n"
      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" fill=\"#d00\">%s</text>\n",
      x, y, x, kTop + kHeight, x, y, right ? x + 8 : x - 8, y - 8, right ? "start" : "end",
      FormatGB(static_cast<double>(Total(s.bytes[peak]))), PhaseOf(s.event[peak], t),
      right ? x + 8 : x - 8, y + 8, right ? "start" : "end", XmlEscape(parts));
}

std::string Legend() {
  std::string out;
  double x = kLeft;
  for (Tag tag : kStack) {
    absl::StrAppendFormat(&out,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                          x, kTop + kHeight + 30, TagColor(tag), x + 16, kTop + kHeight + 40,
                          std::string(TagName(tag)));
    x += 16 + 6.6 * TagName(tag).size() + 18;
  }
  return out;
}

}  // namespace

TagSeries Replay(const StepTimeline& timeline) {
  TagSeries s;
  std::array<size_t, kNumTags> now = timeline.start;
  for (size_t i = 0; i < timeline.events.size(); ++i) {
    const TraceEvent& e = timeline.events[i];
    size_t& tag = now[static_cast<int>(e.tag)];
    if (e.action == TraceAction::kAlloc) {
      tag += e.size;
    } else if (e.action == TraceAction::kFreeCompleted) {
      tag -= std::min(tag, e.size);
    } else {
      continue;
    }
    s.bytes.push_back(now);
    s.event.push_back(i);
  }
  if (s.bytes.empty()) {  // a step that allocated nothing: a flat line
    s.bytes.push_back(now);
    s.event.push_back(0);
  }
  return s;
}

std::string TimelineSvg(const StepTimeline& timeline, const std::string& title) {
  const TagSeries series = Replay(timeline);
  size_t top = 1;
  for (const auto& b : series.bytes) top = std::max(top, Total(b));
  double top_gb = static_cast<double>(top) / 1e9 * 1.12;
  top_gb = TickStep(top_gb) * std::ceil(top_gb / TickStep(top_gb));
  const Scale scale{series.bytes.size(), top_gb};
  std::string out = absl::StrFormat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.1f\" y=\"22\" font-size=\"14\" font-weight=\"bold\">One training step: "
      "allocated bytes by tag, rank 0 (meta device)</text>\n"
      "<text x=\"%.1f\" y=\"38\">%s</text>\n",
      kLeft + kWidth + 30, kTop + kHeight + 56, kLeft, kLeft, XmlEscape(title));
  absl::StrAppend(&out, GbAxis({kLeft, kTop, kLeft + kWidth, kHeight}, top_gb, "GB allocated"),
                  Areas(series, Columns(series), scale), Phases(series, timeline, scale),
                  Peak(series, timeline, scale));
  absl::StrAppendFormat(&out,
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n"
                        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d allocations and "
                        "frees of the pool, in order</text>\n",
                        kLeft, kTop + kHeight, kLeft + kWidth, kTop + kHeight,
                        kLeft + kWidth / 2, kTop + kHeight + 16, series.event.size());
  absl::StrAppend(&out, Legend(), "</svg>\n");
  return out;
}

}  // namespace zero::footprint
