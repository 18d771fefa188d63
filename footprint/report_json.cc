// JSON: {"gb": 1e9, "steps": 2, "note": ..., "runs": [{field: value, ...}]}.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/json.h"
#include "footprint/report.h"
#include "footprint/report_fields.h"

namespace zero::footprint {

std::string ToJson(const std::vector<Row>& rows, int steps) {
  std::string out = absl::StrFormat(
      "{\n  \"note\": %s,\n  \"steps\": %d,\n  \"runs\": [",
      json::Quote("Bytes per rank, measured on rank 0 of N by the real engine on a meta device; "
                "every rank holds the same bytes (units padded to N*16 elements, split "
                "equally). Sent figures: the last step, ring model."),
      steps);
  for (size_t r = 0; r < rows.size(); ++r) {
    absl::StrAppend(&out, r ? ",\n    {" : "\n    {");
    const std::vector<Field> fields = Fields(rows[r]);
    for (size_t i = 0; i < fields.size(); ++i) {
      const Field& f = fields[i];
      absl::StrAppend(&out, i ? ", " : "", json::Quote(f.name), ": ",
                      f.text ? json::Quote(f.value) : f.value);
    }
    out += "}";
  }
  absl::StrAppend(&out, rows.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return out;
}

}  // namespace zero::footprint
