#include <filesystem>
#include <fstream>

#include "tests/fuzz/checkpoint_fuzzer.h"
#include "zero/checkpoint/internal/checkpoint_dir.h"

namespace zero::fuzz {

std::unique_ptr<testing_model::Model> SeedModel() { return *testing_model::MakeMlp(6, 10, 3, 4); }

testing_model::TrainingRun SeedRun(int world) {
  testing_model::TrainingRun run;
  run.world = world;
  run.config.stage = 2;
  run.config.bucket_elements = 40;
  run.capacity = size_t{16} << 20;
  return run;
}

void WriteCheckpoint(const std::string& root, const Archive& archive) {
  std::vector<ArchivedFile> step;
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  for (const ArchivedFile& f : archive.files) {
    if (f.name == checkpoint::kLatestName) {
      std::ofstream(root + "/" + f.name, std::ios::binary) << f.contents;
    } else {
      step.push_back(f);
    }
  }
  WriteFolder(root + "/" + kStepFolder, step);
}

}  // namespace zero::fuzz
