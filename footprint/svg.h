// What the SVG charts share (report_svg.cc's bars, timeline_svg.h's step):
// escaping, the GB axis, the palette per tag. Pure functions.
#pragma once

#include <string>

#include "memory/tag.h"

namespace zero::footprint {

// `text` with &, <, > and " escaped for XML text and attributes.
std::string XmlEscape(const std::string& text);

// 1, 2 or 5 times a power of ten, about a fifth of `top`.
double TickStep(double top);

// The vertical axis of a plot from `top` to `top + height` pixels, 0 to
// `top_gb` GB, with grid lines from x `left` to `right` and its title.
struct PlotBox {
  double left, top, right, height;
};
std::string GbAxis(const PlotBox& box, double top_gb, const std::string& title);

// One color per tag, the same in every chart.
const char* TagColor(Tag tag);

}  // namespace zero::footprint
