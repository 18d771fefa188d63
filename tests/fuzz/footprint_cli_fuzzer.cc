// The footprint command line (footprint/options.h): the input's lines
// are the arguments. ParseOptions either accepts them or says which option
// is wrong; it never runs an experiment, so every input stays fast.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_split.h"
#include "footprint/options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args = absl::StrSplit(text, '\n');
  if (args.size() > 64) return 0;
  absl::StatusOr<zero::footprint::Options> options = zero::footprint::ParseOptions(args);
  if (options.ok() && options->help != zero::footprint::Options::Help::kNone) {
    (void)zero::footprint::Usage(options->help, options->help_match);
  }
  return 0;
}
