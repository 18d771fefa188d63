// The flat fields of a row, in one order, shared by the CSV and JSON
// writers so both carry the same data. Byte counts are exact integers.
#pragma once

#include <string>
#include <vector>

#include "footprint/row.h"

namespace zero::footprint {

struct Field {
  std::string name;
  std::string value;  // as written in CSV
  bool text = false;  // quoted in JSON
};

std::vector<Field> Fields(const Row& row);

}  // namespace zero::footprint
