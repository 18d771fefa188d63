// Writes the checkpoint fuzzer's seeds: real checkpoints of SeedModel(),
// each packed as one archive (file_archive.h).
//   bazel run //tests/fuzz:checkpoint_seeds -- $PWD/tests/fuzz/corpus/checkpoint
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "base/status_macros.h"
#include "tests/fuzz/checkpoint_fuzzer.h"
#include "tests/zero/checkpoint/cluster.h"
#include "tests/zero/test_util.h"

namespace zero::fuzz {
namespace {

absl::Status WriteSeed(int world, size_t chunk_elements, const std::string& out) {
  std::unique_ptr<testing_model::Model> model = SeedModel();
  ASSIGN_OR_RETURN(std::unique_ptr<testing_model::Cluster> cluster,
                   testing_model::Cluster::Create(*model, SeedRun(world), testing_model::AdamW()));
  RETURN_IF_ERROR(cluster->Train(0, 2));
  const std::string root = testing_model::FreshDir("seed");
  checkpoint::SaveOptions options;
  options.chunk_elements = chunk_elements;
  RETURN_IF_ERROR(testing_model::AllOk(cluster->Save(root, options)));
  Archive archive{.flags = kResealManifest, .files = ReadFolder(root + "/" + kStepFolder)};
  for (ArchivedFile& f : ReadFolder(root)) archive.files.push_back(std::move(f));
  std::ofstream(out, std::ios::binary) << Pack(archive);
  std::filesystem::remove_all(root);
  return absl::OkStatus();
}

}  // namespace
}  // namespace zero::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: checkpoint_seeds OUTPUT_FOLDER\n");
    return 2;
  }
  const std::string dir = argv[1];
  for (auto [world, chunk, name] : {std::tuple{2, size_t{16}, "world2_chunk16"},
                                    std::tuple{1, size_t{1} << 20, "world1"}}) {
    absl::Status s = zero::fuzz::WriteSeed(world, chunk, dir + "/" + name);
    if (!s.ok()) {
      std::fprintf(stderr, "%s: %s\n", name, s.ToString().c_str());
      return 1;
    }
  }
  return 0;
}
