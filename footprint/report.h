// The experiment's outputs: a table for the terminal, CSV, JSON and an SVG
// chart. Each takes the rows of a sweep in order.
#pragma once

#include <string>
#include <vector>

#include "footprint/row.h"

namespace zero::footprint {

// GB (1e9 bytes) with three significant digits, as the ZeRO paper rounds
// (120, 31.4, 16.6, 1.88); "0" for zero.
std::string FormatGB(double bytes);

// Columns padded to their widest cell, two spaces apart; `left` per column.
std::string RenderTable(const std::vector<std::string>& headers, const std::vector<bool>& left,
                        const std::vector<std::vector<std::string>>& rows);

std::string FormatTable(const std::vector<Row>& rows, int steps);  // report_table.cc
std::string ToCsv(const std::vector<Row>& rows);                   // report_csv.cc
std::string ToJson(const std::vector<Row>& rows, int steps);       // report_json.cc
std::string ToSvg(const std::vector<Row>& rows);                   // report_svg.cc

}  // namespace zero::footprint
