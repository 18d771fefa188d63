// The checkpoint format's parts on their own: the JSON subset, the
// manifest's round trip and checks, and the chunk plan's coverage.
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/crc32c.h"
#include "base/json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "zero/checkpoint/internal/chunk_plan.h"
#include "zero/checkpoint/internal/data_file.h"
#include "zero/checkpoint/internal/manifest.h"

namespace zero::checkpoint {
namespace {

using ::testing::HasSubstr;

Manifest TwoParamManifest() {
  Manifest m;
  m.optimizer = "adamw";
  m.state_buffers = 1;
  m.param_dtype = DType::kBF16;
  m.steps = 7;
  m.loss_scaler = LossScaler::State{.scale = 0.1, .good_steps = 3, .hysteresis_left = 2};
  m.world_size = 1;
  m.stage = 2;
  m.chunk_elements = 4;
  m.files.push_back({DataFileName(0, 1), 32 + 4 * 2 * 10, 0xdeadbeef});
  m.params.push_back({"w \"1\"", 6, {}});
  m.params.push_back({"b", 4, {}});
  uint64_t offset = 32;
  auto add = [&](ParamRecord& p, int buffer, uint64_t begin, uint64_t end) {
    p.chunks.push_back({buffer, begin, end, 0, offset, static_cast<uint32_t>(offset * 7)});
    offset += 4 * (end - begin);
  };
  add(m.params[0], 1, 4, 6);  // out of order: serialization sorts
  add(m.params[0], 0, 0, 4);
  add(m.params[0], 0, 4, 6);
  add(m.params[0], 1, 0, 4);
  add(m.params[1], 0, 0, 4);
  add(m.params[1], 1, 0, 4);
  return m;
}

TEST(Manifest, RoundTrips) {
  const std::string text = SerializeManifest(TwoParamManifest());
  absl::StatusOr<Manifest> m = ParseManifest(text, "m");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->optimizer, "adamw");
  EXPECT_EQ(m->param_dtype, DType::kBF16);
  EXPECT_EQ(m->steps, 7);
  ASSERT_TRUE(m->loss_scaler.has_value());
  EXPECT_EQ(m->loss_scaler->scale, 0.1);  // exact through %.17g
  EXPECT_EQ(m->loss_scaler->hysteresis_left, 2);
  EXPECT_EQ(m->files[0].crc32c, 0xdeadbeefu);
  EXPECT_EQ(m->params[0].name, "w \"1\"");
  ASSERT_EQ(m->params[0].chunks.size(), 4u);
  EXPECT_EQ(m->params[0].chunks[0].buffer, 0);
  EXPECT_EQ(m->params[0].chunks[3].begin, 4u);
  EXPECT_EQ(SerializeManifest(*m), text);
}

TEST(Manifest, RejectsGapsAndOutOfFileChunks) {
  Manifest gap = TwoParamManifest();
  gap.params[0].chunks.erase(gap.params[0].chunks.begin() + 2);  // state0 [4, 6) missing
  EXPECT_THAT(std::string(ParseManifest(SerializeManifest(gap), "m").status().message()),
              HasSubstr("master elements [4, 6) are in no chunk"));
  Manifest outside = TwoParamManifest();
  outside.files[0].bytes = 40;
  EXPECT_THAT(std::string(ParseManifest(SerializeManifest(outside), "m").status().message()),
              HasSubstr("lies outside its file"));
  Manifest renamed = TwoParamManifest();
  renamed.files[0].name = "other.bin";
  EXPECT_FALSE(ParseManifest(SerializeManifest(renamed), "m").ok());
  // Sizes that wrap 64 bits: 2^62 elements are 0 bytes mod 2^64, and an
  // offset near 2^64 plus a few bytes is small; both "fit" unchecked.
  Manifest wrapped = TwoParamManifest();
  wrapped.params[1].numel = uint64_t{1} << 62;
  wrapped.params[1].chunks = {{0, 0, uint64_t{1} << 62, 0, 32, 0}};
  EXPECT_THAT(std::string(ParseManifest(SerializeManifest(wrapped), "m").status().message()),
              HasSubstr("lies outside its file"));
  Manifest far = TwoParamManifest();
  far.params[1].chunks[0].offset = ~uint64_t{0} - 7;
  EXPECT_THAT(std::string(ParseManifest(SerializeManifest(far), "m").status().message()),
              HasSubstr("lies outside its file"));
}

TEST(Manifest, RejectsDamage) {
  const std::string text = SerializeManifest(TwoParamManifest());
  std::string flipped = text;
  flipped[text.size() / 2] ^= 1;
  EXPECT_EQ(ParseManifest(flipped, "m").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(ParseManifest(text.substr(0, text.size() - 1), "m").status().message()),
              HasSubstr("truncated"));
  EXPECT_THAT(std::string(ParseManifest("{}", "m").status().message()),
              HasSubstr("does not start"));
}

// A checkpoint of another version of the format: refused, naming both
// versions, whether the header line, the JSON or a data file says so.
TEST(FormatVersion, AnotherVersionIsRefusedNamingBoth) {
  const std::string text = SerializeManifest(TwoParamManifest());
  const size_t v = text.find(" v1 ");
  ASSERT_NE(v, std::string::npos);
  std::string newer = text;
  newer.replace(v, 4, " v2 ");
  absl::Status header = ParseManifest(newer, "m").status();
  EXPECT_EQ(header.code(), absl::StatusCode::kFailedPrecondition) << header;
  EXPECT_THAT(std::string(header.message()),
              HasSubstr("manifest 'm' is format version 2; this build reads version 1"));

  // The JSON's own "version", resealed so the header's checksum passes.
  const size_t newline = text.find('\n');
  std::string body = text.substr(newline + 1);
  const size_t field = body.find("\"version\": 1");
  ASSERT_NE(field, std::string::npos);
  body.replace(field, 12, "\"version\": 7");
  const std::string resealed = absl::StrFormat(
      "zero-checkpoint-manifest v1 crc32c=%08x bytes=%d\n%s", Crc32c(body), body.size(), body);
  absl::Status json = ParseManifest(resealed, "m").status();
  EXPECT_THAT(std::string(json.message()),
              HasSubstr("format version 7; this build reads version 1"));

  std::string data = EncodeDataHeader({});
  const uint32_t two = 2;
  std::memcpy(data.data() + 8, &two, 4);
  EXPECT_THAT(std::string(DecodeDataHeader(data, "d").status().message()),
              HasSubstr("'d' has format version 2; this build reads 1"));
}

TEST(Manifest, ChecksTheModelAndOptimizer) {
  const Manifest m = TwoParamManifest();
  auto layout = Layout::Create({{"w \"1\"", 6, 0}, {"b", 4, 0}}, 3, 100, false);
  ASSERT_TRUE(layout.ok());
  EXPECT_TRUE(CheckMatches(m, *layout, "adamw", 1, "p").ok());
  EXPECT_THAT(std::string(CheckMatches(m, *layout, "sgd", 1, "p").message()),
              HasSubstr("optimizer 'adamw'"));
  auto other = Layout::Create({{"w \"1\"", 6, 0}, {"b", 5, 0}}, 3, 100, false);
  EXPECT_THAT(std::string(CheckMatches(m, *other, "adamw", 1, "p").message()),
              HasSubstr("parameter #1 is 'b' (4 elements)"));
  auto fewer = Layout::Create({{"w \"1\"", 6, 0}}, 3, 100, false);
  EXPECT_THAT(std::string(CheckMatches(m, *fewer, "adamw", 1, "p").message()),
              HasSubstr("holds 2 parameters, this model has 1"));
}

// Over every world size, the ranks' runs cover every element of every
// parameter exactly once, and each plan's chunks sit back to back.
TEST(ChunkPlan, RunsTileEveryParameterAndChunksPack) {
  std::vector<ParamSpec> specs = {{"a", 100, 0}, {"b", 3, 0}, {"c", 257, 1}, {"d", 16, 1}};
  for (int world : {1, 2, 4, 8}) {
    for (size_t bucket : {size_t{50}, size_t{1000}}) {
      auto layout = Layout::Create(specs, world, bucket, true);
      ASSERT_TRUE(layout.ok());
      std::vector<std::vector<int>> seen;
      for (const ParamSpec& s : specs) seen.emplace_back(s.numel, 0);
      for (int r = 0; r < world; ++r) {
        for (const OwnedRun& run : OwnedRuns(*layout, r)) {
          for (size_t e = run.begin; e < run.end; ++e) ++seen[run.param][e];
        }
        const DataFilePlan plan = PlanDataFile(*layout, r, 3, 7, kDataHeaderBytes);
        uint64_t offset = kDataHeaderBytes;
        for (const PlannedChunk& c : plan.chunks) {
          EXPECT_EQ(c.offset, offset);
          EXPECT_LE(c.end - c.begin, 7u);
          offset += 4 * (c.end - c.begin);
        }
        EXPECT_EQ(plan.bytes, offset);
      }
      for (const auto& p : seen) {
        for (int count : p) ASSERT_EQ(count, 1) << "world " << world << " bucket " << bucket;
      }
    }
  }
}

}  // namespace
}  // namespace zero::checkpoint
