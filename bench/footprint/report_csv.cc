// CSV (RFC 4180): a header, then one line per run; null as an empty cell.
#include "absl/strings/str_cat.h"
#include "bench/footprint/report.h"
#include "bench/footprint/report_fields.h"

namespace zero::footprint {
namespace {

std::string Cell(const Field& f) {
  if (f.value == "null") return "";
  if (!f.text || f.value.find_first_of(",\"\n") == std::string::npos) return f.value;
  std::string quoted = "\"";
  for (char c : f.value) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

std::string ToCsv(const std::vector<Row>& rows) {
  std::string out;
  const std::vector<Field> header = Fields(rows.empty() ? Row{} : rows[0]);
  for (size_t i = 0; i < header.size(); ++i) absl::StrAppend(&out, i ? "," : "", header[i].name);
  out += "\n";
  for (const Row& r : rows) {
    const std::vector<Field> fields = Fields(r);
    for (size_t i = 0; i < fields.size(); ++i) absl::StrAppend(&out, i ? "," : "", Cell(fields[i]));
    out += "\n";
  }
  return out;
}

}  // namespace zero::footprint
