#include "footprint/svg.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "base/json.h"

namespace zero::footprint {

std::string XmlEscape(const std::string& text) {
  // A model's name is its file's: any bytes. XML takes valid UTF-8 and no
  // control characters but tab and line ends, not even as references.
  std::string out;
  for (char c : json::ValidUtf8(text)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += "\xEF\xBF\xBD";  // U+FFFD
        } else {
          out += c;
        }
    }
  }
  return out;
}

double TickStep(double top) {
  const double raw = top / 5, power = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

std::string GbAxis(const PlotBox& box, double top_gb, const std::string& title) {
  std::string out;
  const double step = TickStep(top_gb);
  for (double v = 0; v <= top_gb * 1.0001; v += step) {
    const double y = box.top + box.height * (1 - v / top_gb);
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                          box.left, y, box.right, y, box.left - 6, y + 4,
                          absl::StrFormat("%g", v));
  }
  absl::StrAppendFormat(&out,
                        "<text transform=\"translate(20 %.1f) rotate(-90)\" "
                        "text-anchor=\"middle\">%s</text>\n",
                        box.top + box.height / 2, XmlEscape(title));
  return out;
}

const char* TagColor(Tag tag) {
  switch (tag) {
    case Tag::kParameters: return "#4e79a7";
    case Tag::kGradients: return "#f28e2b";
    case Tag::kOptimizerState: return "#e15759";
    case Tag::kCommunication: return "#76b7b2";
    case Tag::kGathered: return "#edc948";
    case Tag::kActivations: return "#b07aa1";
    case Tag::kOther: return "#bab0ac";
  }
  return "#000";
}

}  // namespace zero::footprint
