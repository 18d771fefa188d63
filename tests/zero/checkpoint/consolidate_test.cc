// (d) The consolidated safetensors file parses and holds exactly the
// parameters, whatever world size saved them; the tool's bad-input path.
#include "zero/checkpoint/consolidate.h"

#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/zero/checkpoint/expect.h"
#include "zero/checkpoint/internal/data_file.h"
#include "zero/checkpoint/internal/file_io.h"
#include "zero/checkpoint/internal/manifest.h"

namespace zero::testing_model {
namespace {

using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Parses a safetensors file the way its readers do and returns the tensors
// in header order, checking every entry's dtype, shape and offsets.
ParamSet ParseSafetensors(const std::string& bytes, const Model& model) {
  uint64_t length = 0;
  EXPECT_GE(bytes.size(), 8u);
  std::memcpy(&length, bytes.data(), 8);
  EXPECT_EQ(length % 8, 0u);
  absl::StatusOr<json::Value> header = json::Parse(std::string_view(bytes).substr(8, length));
  EXPECT_TRUE(header.ok()) << header.status();
  if (!header.ok()) return {};
  EXPECT_EQ(header->members.size(), model.params().size() + 1);  // + __metadata__
  const json::Value* metadata = header->Find("__metadata__");
  EXPECT_TRUE(metadata != nullptr && metadata->Find("steps") != nullptr);
  ParamSet tensors;
  uint64_t expected_begin = 0;
  for (const ParamInfo& p : model.params()) {
    const json::Value* entry = header->Find(p.name);
    EXPECT_NE(entry, nullptr) << p.name;
    if (entry == nullptr) return {};
    EXPECT_EQ(entry->Find("dtype")->text, "F32");
    EXPECT_EQ(*json::AsUint(entry->Find("shape")->items.at(0), "shape"), p.numel);
    const auto& offsets = entry->Find("data_offsets")->items;
    const uint64_t begin = *json::AsUint(offsets.at(0), "begin");
    const uint64_t end = *json::AsUint(offsets.at(1), "end");
    EXPECT_EQ(begin, expected_begin);
    EXPECT_EQ(end - begin, p.numel * 4);
    EXPECT_LE(8 + length + end, bytes.size());
    tensors.emplace_back(p.numel);
    std::memcpy(tensors.back().data(), bytes.data() + 8 + length + begin, p.numel * 4);
    expected_begin = end;
  }
  EXPECT_EQ(8 + length + expected_begin, bytes.size());
  return tensors;
}

class Consolidate : public ::testing::TestWithParam<int> {};

TEST_P(Consolidate, OutputParsesAndEqualsTheParameters) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(GetParam(), 3), AdamW());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->Train(0, 2).ok());
  const std::string dir = FreshDir("consolidate");
  checkpoint::SaveOptions options;
  options.chunk_elements = 100;
  ASSERT_TRUE(AllOk((*cluster)->Save(dir, options)).ok());
  const std::string out = dir + "/model.safetensors";
  absl::StatusOr<checkpoint::ConsolidateSummary> summary =
      checkpoint::ConsolidateToSafetensors(dir, out);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->steps, 2);
  EXPECT_EQ(summary->elements, TotalNumel(*model));
  absl::StatusOr<std::vector<ParamSet>> params = (*cluster)->Params();
  ASSERT_TRUE(params.ok());
  ExpectBitIdentical((*params)[0], ParseSafetensors(ReadAll(out), *model), "consolidated");
}

INSTANTIATE_TEST_SUITE_P(Checkpoint, Consolidate, ::testing::Values(1, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// safetensors reserves "__metadata__": a parameter of that name would be a
// second entry under one key, so consolidation refuses it by name.
TEST(ConsolidateNames, AParameterNamedLikeTheMetadataIsRefused) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(1, 1), AdamW());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string dir = FreshDir("consolidate-names");
  ASSERT_TRUE(AllOk((*cluster)->Save(dir)).ok());
  const std::string path = dir + "/step-0/" + checkpoint::kManifestName;
  absl::StatusOr<checkpoint::Manifest> manifest =
      checkpoint::ParseManifest(*checkpoint::ReadWholeFile(path), path);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  manifest->params[1].name = "__metadata__";
  ASSERT_TRUE(checkpoint::WriteWholeFileAtomically(path, checkpoint::SerializeManifest(*manifest))
                  .ok());
  const std::string out = dir + "/model.safetensors";
  absl::StatusOr<checkpoint::ConsolidateSummary> summary =
      checkpoint::ConsolidateToSafetensors(dir, out);
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(summary.status().message(), HasSubstr("named '__metadata__'"));
  EXPECT_FALSE(std::filesystem::exists(out));
}

// The tool itself: exit 0 and a summary; bad input exits 2 with one line.
class ConsolidateTool : public ::testing::Test {
 protected:
  static std::string Tool() {
    const char* srcdir = std::getenv("TEST_SRCDIR");
    return std::string(srcdir ? srcdir : ".") + "/zero/zero/checkpoint/consolidate";
  }
  // Exit status; stderr's lines into *lines.
  static int Run(const std::string& args, std::vector<std::string>* lines) {
    const std::string err = FreshDir("tool") + "/stderr";
    const int status = std::system((Tool() + " " + args + " >/dev/null 2>" + err).c_str());
    std::ifstream f(err);
    for (std::string line; std::getline(f, line);) lines->push_back(line);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

TEST_F(ConsolidateTool, WritesTheFile) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(2, 1), AdamW());
  ASSERT_TRUE(cluster.ok());
  const std::string dir = FreshDir("tool-ok");
  ASSERT_TRUE(AllOk((*cluster)->Save(dir)).ok());
  std::vector<std::string> lines;
  EXPECT_EQ(Run(dir + " " + dir + "/out.safetensors", &lines), 0);
  EXPECT_TRUE(lines.empty());
  EXPECT_TRUE(std::filesystem::exists(dir + "/out.safetensors"));
}

TEST_F(ConsolidateTool, BadInputExitsTwoWithOneLine) {
  const std::string empty = FreshDir("tool-bad");
  std::vector<std::string> lines;
  EXPECT_EQ(Run(empty + " " + empty + "/out.safetensors", &lines), 2);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("no checkpoint at"));
  EXPECT_FALSE(std::filesystem::exists(empty + "/out.safetensors"));
  lines.clear();
  EXPECT_EQ(Run("", &lines), 2);
  EXPECT_EQ(lines.size(), 1u);
}

TEST_F(ConsolidateTool, CorruptChunkExitsTwo) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(2, 1), AdamW());
  ASSERT_TRUE(cluster.ok());
  const std::string dir = FreshDir("tool-corrupt");
  ASSERT_TRUE(AllOk((*cluster)->Save(dir)).ok());
  const std::string file = dir + "/step-0/" + checkpoint::DataFileName(0, 2);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(40);
    const char c = static_cast<char>(f.get() ^ 0x01);
    f.seekp(40);
    f.put(c);
  }
  std::vector<std::string> lines;
  EXPECT_EQ(Run(dir + " " + dir + "/out.safetensors", &lines), 2);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("fails its checksum"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.safetensors"));
}

}  // namespace
}  // namespace zero::testing_model
