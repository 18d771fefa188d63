// The footprint model-file reader (footprint/model_json.h) on any
// bytes: a module list or a Hugging Face config.json either becomes a model
// within the documented limits or an error naming FILE:LINE:COL.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "footprint/model_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<zero::footprint::ModelSpec> model =
      zero::footprint::ModelFromJson(text, "fuzz.json");
  if (!model.ok() && model.status().message().find("fuzz.json") == std::string_view::npos) {
    std::abort();  // every error names the file
  }
  return 0;
}
