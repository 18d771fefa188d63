#include "tests/fuzz/file_archive.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace zero::fuzz {

namespace fs = std::filesystem;

Archive Unpack(std::string_view bytes) {
  Archive archive;
  if (bytes.empty()) return archive;
  archive.flags = static_cast<uint8_t>(bytes[0]);
  size_t at = 1;
  while (at < bytes.size()) {
    const size_t name_size = static_cast<uint8_t>(bytes[at++]);
    if (at + name_size > bytes.size()) break;
    std::string name(bytes.substr(at, name_size));
    at += name_size;
    uint32_t size = 0;
    const size_t size_bytes = std::min<size_t>(4, bytes.size() - at);
    std::memcpy(&size, bytes.data() + at, size_bytes);
    at += size_bytes;
    const std::string_view contents = bytes.substr(at, size);
    at += contents.size();
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos) {
      continue;
    }
    archive.files.push_back({std::move(name), std::string(contents)});
  }
  return archive;
}

std::string Pack(const Archive& archive) {
  std::string out(1, static_cast<char>(archive.flags));
  for (const ArchivedFile& f : archive.files) {
    out += static_cast<char>(f.name.size());
    out += f.name;
    const uint32_t size = static_cast<uint32_t>(f.contents.size());
    out.append(reinterpret_cast<const char*>(&size), 4);
    out += f.contents;
  }
  return out;
}

std::vector<ArchivedFile> ReadFolder(const std::string& folder) {
  std::vector<ArchivedFile> files;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    files.push_back({entry.path().filename(), {std::istreambuf_iterator<char>(in), {}}});
  }
  std::sort(files.begin(), files.end(),
            [](const ArchivedFile& a, const ArchivedFile& b) { return a.name < b.name; });
  return files;
}

void WriteFolder(const std::string& folder, const std::vector<ArchivedFile>& files) {
  fs::remove_all(folder);
  fs::create_directories(folder);
  for (const ArchivedFile& f : files) {
    std::ofstream(fs::path(folder) / f.name, std::ios::binary) << f.contents;
  }
}

}  // namespace zero::fuzz
