// (c) A damaged checkpoint, or one of another model or optimizer, is an
// error on every rank that names the file and the fault, and leaves every
// engine exactly as it was: its states are unchanged and training goes on
// bit for bit as if no load had been tried.
#include <filesystem>
#include <fstream>

#include "base/crc32c.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "optimizers/sgd.h"
#include "tests/zero/checkpoint/expect.h"
#include "zero/checkpoint/checkpoint.h"
#include "zero/checkpoint/internal/data_file.h"
#include "zero/checkpoint/internal/manifest.h"

namespace zero::testing_model {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int kSavedAt = 2, kVictimAt = 3;

class CorruptCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = SmallTransformer();
    root_ = FreshDir("good");
    auto saver = Cluster::Create(*model_, SmallRun(4, 2), AdamW());
    ASSERT_TRUE(saver.ok()) << saver.status();
    ASSERT_TRUE((*saver)->Train(0, kSavedAt).ok());
    checkpoint::SaveOptions options;
    options.chunk_elements = 64;
    ASSERT_TRUE(AllOk((*saver)->Save(root_, options)).ok());
    step_ = root_ + "/step-" + std::to_string(kSavedAt);
    // The engines a bad load must not disturb: 2 ranks, so each reads
    // the files of two saving ranks and learns of the others' faults.
    auto victim = Cluster::Create(*model_, SmallRun(2, 3), AdamW());
    ASSERT_TRUE(victim.ok()) << victim.status();
    victim_ = *std::move(victim);
    ASSERT_TRUE(victim_->Train(0, kVictimAt).ok());
    absl::StatusOr<ModelStates> before = victim_->States();
    ASSERT_TRUE(before.ok());
    before_ = *before;
  }

  std::string File(int rank) const { return step_ + "/" + checkpoint::DataFileName(rank, 4); }

  // Every rank fails alike, naming what is expected; the victim is intact.
  void ExpectLoadFails(const std::string& path, absl::StatusCode code,
                       const std::vector<std::string>& mentions) {
    const std::vector<absl::Status> statuses = victim_->Load(path);
    for (int r = 0; r < victim_->world(); ++r) {
      EXPECT_EQ(statuses[r].code(), code) << "rank " << r << ": " << statuses[r];
      EXPECT_EQ(statuses[r].message(), statuses[0].message()) << "rank " << r;
      for (const std::string& m : mentions) {
        EXPECT_THAT(std::string(statuses[r].message()), HasSubstr(m)) << "rank " << r;
      }
    }
    absl::StatusOr<ModelStates> after = victim_->States();
    ASSERT_TRUE(after.ok()) << after.status();
    ExpectStatesIdentical(before_, *after, "after a failed load");
  }

  // After every test's failed loads, the victim trains on bit for bit.
  void TearDown() override {
    if (HasFatalFailure() || victim_ == nullptr) return;
    auto untouched = Cluster::Create(*model_, SmallRun(2, 3), AdamW());
    ASSERT_TRUE(untouched.ok());
    ASSERT_TRUE((*untouched)->Train(0, kVictimAt + 1).ok());
    ASSERT_TRUE(victim_->Train(kVictimAt, kVictimAt + 1).ok());
    absl::StatusOr<std::vector<ParamSet>> expected = (*untouched)->Params();
    ASSERT_TRUE(expected.ok());
    ExpectParamsOnEveryRank((*expected)[0], *victim_, "trained on after the failed load");
  }

  static void FlipByte(const std::string& path, std::streamoff at) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(at);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x20;
    f.seekp(at);
    f.write(&c, 1);
  }

  std::unique_ptr<Model> model_;
  std::string root_, step_;
  std::unique_ptr<Cluster> victim_;
  ModelStates before_;
};

// The file checksums in the manifest come from the chunks' (combined, not
// recomputed): they must still be each whole file's CRC.
TEST_F(CorruptCheckpoint, ManifestHoldsEachFilesCrc) {
  auto read = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  absl::StatusOr<checkpoint::Manifest> m =
      checkpoint::ParseManifest(read(step_ + "/" + checkpoint::kManifestName), step_);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->files.size(), 4u);
  for (const checkpoint::FileRecord& file : m->files) {
    const std::string bytes = read(step_ + "/" + file.name);
    EXPECT_EQ(bytes.size(), file.bytes) << file.name;
    EXPECT_EQ(Crc32c(bytes), file.crc32c) << file.name;
  }
}

TEST_F(CorruptCheckpoint, TruncatedDataFile) {
  fs::resize_file(File(1), fs::file_size(File(1)) - 10);
  ExpectLoadFails(root_, absl::StatusCode::kDataLoss, {"rank-00001-of-00004.bin", "truncated"});
}

TEST_F(CorruptCheckpoint, FlippedByteInDataFile) {
  FlipByte(File(2), static_cast<std::streamoff>(fs::file_size(File(2)) / 2));
  ExpectLoadFails(root_, absl::StatusCode::kDataLoss,
                  {"rank-00002-of-00004.bin", "fails its checksum", "corrupted"});
}

TEST_F(CorruptCheckpoint, FlippedByteInDataFileHeader) {
  FlipByte(File(0), 2);
  ExpectLoadFails(root_, absl::StatusCode::kDataLoss,
                  {"rank-00000-of-00004.bin", "not a zero checkpoint data file"});
}

TEST_F(CorruptCheckpoint, FlippedByteInManifest) {
  const std::string manifest = step_ + "/manifest";
  FlipByte(manifest, static_cast<std::streamoff>(fs::file_size(manifest) / 2));
  ExpectLoadFails(root_, absl::StatusCode::kDataLoss, {manifest, "fails its checksum"});
}

TEST_F(CorruptCheckpoint, TruncatedManifest) {
  const std::string manifest = step_ + "/manifest";
  fs::resize_file(manifest, fs::file_size(manifest) - 100);
  ExpectLoadFails(root_, absl::StatusCode::kDataLoss, {manifest, "truncated"});
}

TEST_F(CorruptCheckpoint, MissingPartFile) {
  fs::remove(File(3));
  ExpectLoadFails(root_, absl::StatusCode::kNotFound, {"rank-00003-of-00004.bin", "No such file"});
}

// A part file of the same model and size from another save: only the chunk
// checksums can tell, and they do.
TEST_F(CorruptCheckpoint, PartFileFromAnotherSave) {
  auto other = Cluster::Create(*model_, SmallRun(4, 2), AdamW());
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Train(0, kSavedAt + 1).ok());
  const std::string other_root = FreshDir("other");
  checkpoint::SaveOptions options;
  options.chunk_elements = 64;
  ASSERT_TRUE(AllOk((*other)->Save(other_root, options)).ok());
  fs::copy_file(other_root + "/step-3/" + checkpoint::DataFileName(1, 4), File(1),
                fs::copy_options::overwrite_existing);
  ExpectLoadFails(root_, absl::StatusCode::kDataLoss,
                  {"rank-00001-of-00004.bin", "fails its checksum"});
}

TEST_F(CorruptCheckpoint, NoCheckpointThere) {
  const std::string empty = FreshDir("empty");
  ExpectLoadFails(empty, absl::StatusCode::kNotFound, {empty, "latest"});
}

// Checkpoints of other models: other names (an MLP), or the same names with
// other sizes (a narrower transformer).
TEST_F(CorruptCheckpoint, ManifestOfAnotherModel) {
  for (int hidden : {0, 8}) {
    std::unique_ptr<Model> other = hidden == 0 ? *MakeMlp(16, 32, 8, 8) : SmallTransformer(hidden);
    auto saver = Cluster::Create(*other, SmallRun(2, 1), AdamW());
    ASSERT_TRUE(saver.ok());
    const std::string dir = FreshDir("other-model");
    ASSERT_TRUE(AllOk((*saver)->Save(dir)).ok());
    ExpectLoadFails(dir, absl::StatusCode::kFailedPrecondition,
                    {"does not fit this engine", "parameter #0", "in this model"});
  }
}

TEST_F(CorruptCheckpoint, OptimizerMismatch) {
  OptimizerFactory sgd = [] {
    SgdConfig config;
    config.lr = 0.05;
    config.momentum = 0.9;
    return MakeSgd(config);
  };
  auto saver = Cluster::Create(*model_, SmallRun(2, 1), sgd);
  ASSERT_TRUE(saver.ok());
  const std::string dir = FreshDir("sgd");
  ASSERT_TRUE(AllOk((*saver)->Save(dir)).ok());
  ExpectLoadFails(dir, absl::StatusCode::kFailedPrecondition,
                  {"optimizer 'sgd' (1 state buffers)", "'adamw' (2)"});
}

}  // namespace
}  // namespace zero::testing_model
