#include "footprint/flag_help.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"

namespace zero::footprint {
namespace {

constexpr size_t kLineLength = 80;

// Words on lines: the first line indented by `first_indent`, the others by
// `indent`. A word joins the line when the line and the word come to less
// than kLineLength columns (with the space between them, at most
// kLineLength), else it starts the next line; one longer than a line gets
// a line of its own.
class LineWriter {
 public:
  LineWriter(std::ostream& out, size_t first_indent, size_t indent)
      : out_(out), first_indent_(first_indent), indent_(indent) {}

  void Word(absl::string_view word) {
    if (column_ != 0 && column_ + word.size() >= kLineLength) EndLine();
    if (column_ == 0) {
      column_ = started_ ? indent_ : first_indent_;
      started_ = true;
      out_ << std::string(column_, ' ');
    } else {
      out_ << ' ';
      ++column_;
    }
    out_ << word;
    column_ += word.size();
  }

  // The words of `text`, its line breaks kept.
  void Text(absl::string_view text) {
    bool first = true;
    for (absl::string_view line : absl::StrSplit(text, absl::ByAnyChar("\n\r"))) {
      if (!first) EndLine();
      first = false;
      for (absl::string_view word :
           absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
        Word(word);
      }
    }
  }

  void EndLine() {
    out_ << '\n';
    column_ = 0;
  }

 private:
  std::ostream& out_;
  const size_t first_indent_, indent_;
  size_t column_ = 0;
  bool started_ = false;
};

std::string Shown(const absl::CommandLineFlag& flag, std::string value) {
  return flag.IsOfType<std::string>() ? absl::StrCat("\"", value, "\"") : value;
}

using FlagList = std::vector<const absl::CommandLineFlag*>;

// Folder (up to its last '/') -> file -> its flags.
std::map<std::string, std::map<std::string, FlagList>> FlagsByFile(absl::string_view filter) {
  std::map<std::string, std::map<std::string, FlagList>> groups;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    const std::string file(flag->Filename());
    if (!absl::StrContains(file, filter)) continue;
    const size_t slash = file.find_last_of('/');
    groups[file.substr(0, slash == std::string::npos ? 0 : slash + 1)][file].push_back(flag);
  }
  return groups;
}

}  // namespace

void WriteFlagHelp(std::ostream& out, const absl::CommandLineFlag& flag) {
  LineWriter line(out, 4, 6);
  line.Word(absl::StrCat("--", flag.Name()));
  line.Text(absl::StrCat("(", flag.Help(), ");"));
  const std::string default_value = flag.DefaultValue(), current = flag.CurrentValue();
  line.Word(absl::StrCat("default: ", Shown(flag, default_value), ";"));
  if (current != default_value) line.Word(absl::StrCat("currently: ", Shown(flag, current), ";"));
  line.EndLine();
}

void WriteFlagsHelp(std::ostream& out, absl::string_view program, absl::string_view file_filter,
                    absl::string_view about) {
  out << program << ": " << about << "\n\n";
  auto groups = FlagsByFile(file_filter);
  absl::string_view folder_gap;
  for (auto& [folder, files] : groups) {
    out << folder_gap;
    folder_gap = "\n\n";
    absl::string_view file_gap;
    for (auto& [file, flags] : files) {
      out << file_gap << "  Flags from " << file << ":\n";
      file_gap = "\n";
      std::sort(flags.begin(), flags.end(),
                [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
      for (const absl::CommandLineFlag* flag : flags) WriteFlagHelp(out, *flag);
    }
  }
  LineWriter footer(out, 0, 0);
  if (groups.empty()) footer.Text("No flags matched.\n");
  footer.EndLine();
  footer.Text(
      "Try --helpfull to get a list of all flags or --help=substring shows help for flags "
      "which include specified substring in either in the name, or description or path.\n");
}

}  // namespace zero::footprint
