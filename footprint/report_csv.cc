// CSV (RFC 4180): a header, then one line per run; null as an empty cell.
#include "absl/strings/str_cat.h"
#include "base/json.h"
#include "footprint/report.h"
#include "footprint/report_fields.h"

namespace zero::footprint {
namespace {

std::string Cell(const Field& f) {
  if (f.value == "null") return "";
  if (!f.text) return f.value;
  // Names come from file names (any bytes): UTF-8 for the readers.
  const std::string value = json::ValidUtf8(f.value);
  if (value.find_first_of(",\"\r\n") == std::string::npos) return value;
  std::string quoted = "\"";
  for (char c : value) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
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
