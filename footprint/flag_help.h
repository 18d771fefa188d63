// Flag help in the layout abseil's --help prints, written over abseil's
// public flag API (absl/flags/reflection.h): the printer abseil uses is in
// absl/flags/internal/, which other code must not include. Each flag is
//     --name (help); default: value;
// on lines of at most 80 columns, continued six spaces in.
#pragma once

#include <ostream>

#include "absl/flags/commandlineflag.h"
#include "absl/strings/string_view.h"

namespace zero::footprint {

// One flag, as above; string values in quotes, and "currently: value;" when
// the flag is not at its default.
void WriteFlagHelp(std::ostream& out, const absl::CommandLineFlag& flag);

// "PROGRAM: ABOUT", then every flag defined in a file whose name holds
// `file_filter` (every flag for ""), under "  Flags from FILE:" by folder
// and file, by name within a file; then where --helpfull and --help=WORD
// lead.
void WriteFlagsHelp(std::ostream& out, absl::string_view program, absl::string_view file_filter,
                    absl::string_view about);

}  // namespace zero::footprint
