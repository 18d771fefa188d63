// A few small files as one fuzzer input, so that libFuzzer mutates a whole
// checkpoint folder at once:
//   byte 0: flags (kResealManifest: rewrite the manifest's header line to
//           match its body, so mutations of the JSON reach the parser past
//           the checksum)
//   then per file: u8 name length, name, u32 little-endian size, contents.
// A truncated last entry is cut at the input's end. Names with '/' or that
// are empty, "." or ".." are skipped; later files of the same name win.
// Not thread-safe; used by one fuzzer thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zero::fuzz {

inline constexpr uint8_t kResealManifest = 1;

struct ArchivedFile {
  std::string name;
  std::string contents;
};

struct Archive {
  uint8_t flags = 0;
  std::vector<ArchivedFile> files;
};

Archive Unpack(std::string_view bytes);
std::string Pack(const Archive& archive);

// Every regular file directly in `folder`, by name.
std::vector<ArchivedFile> ReadFolder(const std::string& folder);
// Empties `folder` (made if missing) and writes `files` into it.
void WriteFolder(const std::string& folder, const std::vector<ArchivedFile>& files);

}  // namespace zero::fuzz
